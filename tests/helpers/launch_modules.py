"""Test helper: one rank of a real CPU launch of a plan entry, run in this process (world size 1,
gloo) as bench.agent.worker runs it, then the modules it loaded, as a JSON list on the last line.

    python tests/helpers/launch_modules.py launch|imports SUITE PARAMS_JSON OUT_DIR

PARAMS_JSON is the entry's params as `ddpbench run` resolves them, the schema's defaults written out.

`launch` runs the whole launch (imports, set-up, warm-up, timed steps); `imports` only the worker's
imports for it, as a launch does before it sets anything up.
"""

import importlib
import json
import os
import socket
import sys

from bench.agent import worker
from bench.common.protocol import LaunchSpec


def main(mode: str, suite: str, params: str, out_dir: str) -> None:
    spec_path = os.path.join(out_dir, "launch.json")
    LaunchSpec(suite, json.loads(params), "gloo", 300.0, os.path.join(out_dir, "results.jsonl"), threads_per_rank=1).write(spec_path)
    if mode == "imports":
        for module in worker.launch_imports(LaunchSpec.read(spec_path)):
            importlib.import_module(module)
    else:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        worker.main([spec_path])
    print(json.dumps(sorted(sys.modules)))
    worker.exit_rank(0)


if __name__ == "__main__":
    main(*sys.argv[1:])
