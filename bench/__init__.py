"""ddpbench: does my GPU interconnect slow my training?

`bench.agent` runs on the GPU host (torch and the standard library only);
`bench.common` is what both sides run (standard library only, shipped with the agent);
everything else is the controller side and never imports torch.
"""

__version__ = "0.1.0"
