import sys

from bench.common.escape import terminal

try:
    from bench.cli import main
except ModuleNotFoundError as missing:
    if (missing.name or "").split(".")[0] == "bench":
        raise
    # `python3 -m bench` in a fresh shell: the system's Python, not the venv that has the tool's packages.
    print(terminal(f"error: {sys.executable} lacks ddpbench's packages (no module named {missing.name!r}); "
                   "run it from the venv that `make bench` or `make setup` made: .venv/bin/ddpbench "
                   "(or `. .venv/bin/activate` first), or pip install -e . into this Python"), file=sys.stderr)
    sys.exit(2)

sys.exit(main())
