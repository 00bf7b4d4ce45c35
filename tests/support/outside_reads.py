"""The tests read only what a clone of the repository has: a test that opens a file outside the
repository, the temporary folders, Python's installation (the venv, site-packages, the standard
library) and the system's folders fails, naming the file. Such a file (a folder beside the
checkout, a capture in someone's home) passes the test here and fails it in every other clone.

An audit hook (sys.addaudithook) sees every file the test process opens (`open`: builtins.open,
io.open, os.open, pathlib) or lists (`os.listdir`, `os.scandir`: glob, iterdir, rglob), and the
working folder and arguments of every child it starts (`subprocess.Popen`: an absolute path among
the arguments, as a test hands a file to the CLI). A path counts only where it exists: a test that
names a missing file on purpose reads nothing. What it does not see: what a child process opens by
itself (the CLI under test, torchrun's ranks, the daemons: they run the product's code on the
paths a test gives them, and those are checked), a path hidden inside an argument
(`--out=/path`) or an environment variable, and a symbolic link inside the allowed folders that
points out of them."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import tempfile
from pathlib import Path

# The system's folders: the libraries, tools, devices and settings every machine has, and the
# software installed beside them (/opt: a CI machine's wheels of torch, for the Docker image's build).
SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/dev", "/run",
          "/var/lib", "/var/cache")


def allowed_roots(repo: Path) -> tuple[str, ...]:
    """The repository, the temporary folders, Python's installation and the system's folders."""
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sysconfig.get_paths().values(),
              *site.getsitepackages(), site.getusersitepackages(),
              *(entry for entry in sys.path if entry and os.path.isdir(entry))}  # a .pth file's folders too
    temporary = {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}
    # The user's cache (matplotlib's font list): what tools keep there they rebuild where it is missing.
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    roots = {os.path.abspath(root) for root in (str(repo), *python, *temporary, cache, *SYSTEM)}
    return tuple(sorted(root.rstrip("/") + "/" for root in roots))


class OutsideReads:
    """Collects the paths outside the allowed folders that the process opened, until taken."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots  # allowed_roots(): each ends in "/"
        self.found: list[str] = []

    def outside(self, path) -> "str | None":
        """The path, absolute, where it exists outside every allowed folder; else None."""
        if isinstance(path, int):  # a file descriptor: opened already, its path was seen then
            return None
        try:
            absolute = os.path.abspath(os.fsdecode(path))
        except (TypeError, ValueError):
            return None
        if (absolute + "/").startswith(self.roots) or not os.path.lexists(absolute):
            return None
        return absolute

    def hook(self, event: str, args: tuple) -> None:
        if event == "open" or event == "os.listdir" or event == "os.scandir":
            paths = args[:1]
        elif event == "subprocess.Popen":
            executable, argv, cwd, _env = args
            paths = [cwd, *(arg for arg in (argv if isinstance(argv, (list, tuple)) else [argv])
                           if isinstance(arg, (str, bytes, os.PathLike)) and os.fspath(arg)[:1] in ("/", b"/"))]
        else:
            return
        for path in paths:
            if path is not None and (found := self.outside(path)) is not None:
                self.found.append(f"{found} ({event})")

    def take(self) -> list[str]:
        """What was found since the last take, each path once."""
        found, self.found = list(dict.fromkeys(self.found)), []
        return found

    def install(self) -> "OutsideReads":
        sys.addaudithook(self.hook)
        return self
