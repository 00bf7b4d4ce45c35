"""Files to and from a host by SFTP: a copy that is cut never passes for the file."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import Callable

import paramiko
from fabric import Connection

from bench.common.files import open_anew
from bench.common.protocol import Event, Stage, Warned
from bench.controller.errors import HostError
from bench.controller.inventory import Host
from bench.controller.ssh.connection import is_open


def sftp_of(connection: Connection, host: Host) -> paramiko.SFTPClient:
    """The connection's SFTP client (Fabric keeps one per connection), within command_timeout_s."""
    sftp = connection.sftp()
    sftp.get_channel().settimeout(host.command_timeout_s)
    return sftp


def put_bytes(connection: Connection, host: Host, data: bytes, path: str) -> None:
    """Write a file on the host by SFTP."""
    try:
        with sftp_of(connection, host).open(path, "wb") as remote:
            remote.write(data)
    except (OSError, EOFError, paramiko.SSHException) as err:
        raise HostError(f"copying {posixpath.basename(path)} to {host.address}:{path} failed: {err}") from None


def put_file(connection: Connection, host: Host, local: Path, path: str) -> None:
    """Copy a local file to the host by SFTP, through a .part file: a cut copy never passes for the file."""
    partial = path + ".part"
    try:
        sftp = sftp_of(connection, host)
        sftp.put(str(local), partial)
        sftp.posix_rename(partial, path)
    except (OSError, EOFError, paramiko.SSHException) as err:
        # sftp-server reports a full disk as a bare "Failure" (SFTP v3 has no code for it).
        # A write that does not fit can also pass unnoticed until the sizes are compared.
        full = str(err) in ("Failure", "No space left on device") or str(err).startswith("size mismatch")
        reason = f"no space left on the host's disk ({err})" if full else str(err)
        raise HostError(f"copying {local} to {host.address}:{path} failed: {reason}; free space in its workdir or set workdir: to a bigger disk") from None


def fetch_results(connection: Connection, out_dir: str, result_dir: Path, progress: Callable[[Event], None]) -> bool:
    """raw.json and launches/*.log of an agent's out_dir, whatever state the agent left them in.
    True when everything there is here and raw.json (if any) reads as JSON: only then may the
    host's copy be removed."""
    if not is_open(connection):
        return False
    progress(Stage("collect"))
    logs = result_dir / "launches"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        sftp = connection.sftp()
        wanted = [("raw.json", result_dir / "raw.json")]
        try:
            names = sftp.listdir(posixpath.join(out_dir, "launches"))
        except FileNotFoundError:
            names = []
        wanted += [(f"launches/{name}", logs / name) for name in sorted(names) if name.endswith(".log")]
        for remote, local in wanted:
            try:
                get_anew(sftp, posixpath.join(out_dir, remote), local)
            except FileNotFoundError:
                pass
    except (OSError, EOFError, paramiko.SSHException) as err:
        progress(Warned(f"could not fetch the results: {err}"))
        return False
    return fetched_intact(result_dir)


def get_anew(sftp: paramiko.SFTPClient, remote: str, local: Path) -> None:
    """A file of the host copied to local through a .part file created anew: a failed copy never
    passes for the file, and nothing planted at either name (a link) is written through."""
    partial = local.with_name(local.name + ".part")
    try:
        with open_anew(partial, "wb") as out:
            sftp.getfo(remote, out)
        partial.replace(local)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def fetched_intact(result_dir: Path) -> bool:
    """Whether the raw.json fetched into result_dir, if one came, is whole JSON."""
    raw = result_dir / "raw.json"
    try:
        if raw.exists():
            json.loads(raw.read_bytes())
    except (OSError, ValueError):
        return False
    return True
