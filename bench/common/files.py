"""The ways ddpbench writes a file: whole, through a fresh temporary file renamed into place
(write_text), or, for what is written as it goes (a launch's log, a copy arriving), into a file
created anew (open_anew).

A reader (the controller fetching raw.json, a user opening a bundle) never sees half a file, and
nothing planted at the path is ever written through: a symbolic link, or a hard link to a file
elsewhere (a run folder is read back by --resume, whoever wrote into it since). The new file is
created with O_EXCL | O_NOFOLLOW, and what stood at its name is replaced (a rename) or unlinked
first, never opened.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import IO

NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def write_text(path: Path, text: str) -> None:
    """path's content replaced whole by text (UTF-8). An error of the disk names path (a write's own
    OSError names no file: "the disk is full" would not say where)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, NEW_FILE, 0o644)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None


def open_anew(path: Path, mode: str = "w") -> IO:
    """A new, empty file at path, open for writing ("w" text, "wb" bytes): whatever had that name
    (a file, a link) is unlinked, not truncated, so a hard link planted there keeps its content."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, NEW_FILE, 0o644)
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"}))
