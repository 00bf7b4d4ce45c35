"""How long a rank's imports take, by `python -X importtime` in fresh processes: torch alone, and the
worker's imports for a training entry (the ddp suite's ranks) without and with `compile: true`, each
the median of a few runs, in one table. Run it on the machine whose start-up it is about.

    python3 benchmarks/launch_imports.py [--runs 3]

A launch's imports should stay within torch's own plus a second; torch's compiler stack (torch._dynamo,
inductor, sympy) belongs to the compiled entries only.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

RANK_IMPORTS = ("import importlib\n"
                "from bench.agent import worker\n"
                "from bench.common.protocol import LaunchSpec\n"
                "for module in worker.launch_imports(LaunchSpec('ddp', {{'compile': {compile}}}, 'gloo', 1.0, '')):\n"
                "    importlib.import_module(module)\n")
CASES = (
    ("import torch", "import torch"),
    ("rank: training entry", RANK_IMPORTS.format(compile=False)),
    ("rank: training entry, compile: true", RANK_IMPORTS.format(compile=True)),
)


def import_seconds(code: str) -> float:
    """The seconds one fresh interpreter spends importing for `code`: -X importtime's own times, summed."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    micros = 0
    for line in done.stderr.splitlines():
        own = line.removeprefix("import time:").split("|")[0].strip()
        if line.startswith("import time:") and own.isdigit():
            micros += int(own)
    return micros / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    medians = {name: statistics.median(import_seconds(code) for _ in range(runs)) for name, code in CASES}
    torch_s = medians["import torch"]
    print(f"| imports (median of {runs}) | seconds | beyond torch's |")
    print("|---|---|---|")
    for name, seconds in medians.items():
        print(f"| {name} | {seconds:.2f} | {seconds - torch_s:+.2f} |")


if __name__ == "__main__":
    main()
