"""The one way ddpbench writes a file: whole, through a fresh temporary file renamed into place.

A reader (the controller fetching raw.json, a user opening a bundle) never sees half a file, and
a symbolic link planted at the path or beside it is never written through: the temporary file
is created new (O_EXCL | O_NOFOLLOW), and the rename replaces a link at the path itself, never
what it points to.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """path's content replaced whole by text (UTF-8). An error of the disk names path (a write's own
    OSError names no file: "the disk is full" would not say where)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None
