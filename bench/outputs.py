"""Writing into the folders the user names (--out), which may hold what a stranger planted.

A folder is used only if it is one (not a file); a symbolic link, fifo, socket or device inside it
is refused, never written through or opened (files are written by bench.common.files, never through
a link either), and so is a folder where a file is written; a full or read-only disk is named in one
line (see cli.main).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from bench.errors import UserError

# What a write can meet that the user fixes by choosing another folder or freeing space.
DISK_ERRNOS = {
    errno.ENOSPC: "the disk is full: free space or choose another --out",
    errno.EDQUOT: "the disk quota is used up: free space or choose another --out",
    errno.EFBIG: "over the file size limit (ulimit -f): raise it or choose another --out",
    errno.EROFS: "the file system is read-only: choose a writable --out",
    errno.EACCES: "permission denied: choose a folder you can write to as --out",
    errno.EPERM: "not permitted: choose a folder you can write to as --out",
    errno.EISDIR: "a folder stands where ddpbench writes a file: remove it or choose another --out",
}
# What a folder may hold that ddpbench never writes, by its kind (os.lstat's mode).
PLANTED_KINDS = {stat.S_IFLNK: "symbolic link", stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket", stat.S_IFCHR: "device",
                 stat.S_IFBLK: "device"}


def prepare_folder(folder: Path, what: str) -> Path:
    """folder, created if missing; a UserError when it is a file or holds a symbolic link."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: not a folder; give a folder (new or existing) for the {what}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        reason = DISK_ERRNOS.get(err.errno) or f"{err.strerror.lower()}: choose another --out"
        raise UserError(f"{folder}: cannot create the {what}: {reason}") from None
    refuse_planted(folder, what, recursive=False)
    return folder


def planted_kind(path: Path) -> "str | None":
    """"symbolic link", "fifo", "socket" or "device" for what ddpbench never writes; None for a file, a
    folder, or nothing there."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    return PLANTED_KINDS.get(stat.S_IFMT(mode))


def refuse_planted(folder: Path, what: str, recursive: bool = True) -> None:
    """A UserError naming the first symbolic link, fifo, socket or device in folder (ddpbench writes
    none: a link could point anywhere, and opening the others could block or reach a device)."""
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            kind = planted_kind(path)
            if kind:
                raise UserError(f"{path}: a {kind} in the {what}, which ddpbench never writes; it could lead anywhere: "
                                "remove it or choose another folder")
        if not recursive:
            return


def refuse_non_files(paths, what: str) -> None:
    """A UserError naming the first of the paths ddpbench is about to write a file at where something
    else stands: a folder, or what refuse_planted refuses."""
    for path in paths:
        kind = planted_kind(path) or ("folder" if path.is_dir() else None)
        if kind:
            raise UserError(f"{path}: a {kind} where the {what} writes a file; remove it or choose another folder")


def new_folder(parent: Path, name: str, what: str) -> Path:
    """parent/name, created now and so empty: nothing planted can be in it."""
    path = prepare_folder(parent, what) / name
    try:
        path.mkdir()
    except FileExistsError:
        raise UserError(f"{path}: already exists; ddpbench writes a new run into a new folder: choose another --out") from None
    return path


def disk_problem(err: OSError) -> "str | None":
    """One line for an error of the disk being written, or None for any other OSError."""
    fix = DISK_ERRNOS.get(err.errno)
    return f"{err.filename or 'writing the results'}: {fix}" if fix else None
