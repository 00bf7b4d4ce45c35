"""ddpbench: does my GPU interconnect slow my training?

`bench.agent` runs on the GPU host (torch and the standard library only), with the suites' ranks
(`bench/suites/*/ranks.py`) and the models; `bench.common` is what both sides run (standard library
only, shipped with the agent); `bench.suites` holds each suite's folder and the registry; everything
else is the controller side and never imports torch. ARCHITECTURE.md draws the layers.
"""

__version__ = "0.1.0"
