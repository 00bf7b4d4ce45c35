"""`ddpbench image compose TOPOLOGY`: bring up a compose file of compose/ with a plan and the
pinned image, then merge what each of its containers wrote into one bundle.

Each service writes its raw.json to OUT/SERVICE (the compose files mount it so); every service
with one becomes a host of the bundle, all of them one group when there are several (one job).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Callable

from bench.bundle import write_bundle
from bench.bundle.assembly import gather_group_runs, host_entry, new_bundle, new_run_id, settle
from bench.common.paths import SOURCE_ROOT
from bench.common.timestamps import utc_timestamp
from bench.controller.shell import CommandNotFound, LocalShell, Shell
from bench.controller.docker_engine import DOCKER, Docker, DockerError
from bench.errors import UserError

COMPOSE_DIR = SOURCE_ROOT / "compose"


def topologies() -> list[str]:
    return sorted(p.stem for p in COMPOSE_DIR.glob("*.yaml"))


def compose_file(topology: str) -> Path:
    path = Path(topology)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise UserError(f"{path}: no such compose file; give a path or one of {', '.join(topologies())}")
        return path
    if topology not in topologies():
        raise UserError(f"unknown topology {topology!r}; use one of {', '.join(topologies())} or a compose file's path")
    return COMPOSE_DIR / f"{topology}.yaml"


def compose_command(shell: Shell) -> list[str]:
    """`docker compose` (the v2 plugin) where it is installed, else `docker-compose` (v1, the one
    Debian packages)."""
    for command in ([DOCKER, "compose"], ["docker-compose"]):
        try:
            if shell.run([*command, "version"], timeout=60).code == 0:
                return command
        except CommandNotFound:
            continue
    raise DockerError(f"neither `docker compose` nor `docker-compose` is installed on {shell.where}; "
                      "install one (Debian: apt-get install docker-compose)")


def run_topology(topology: str, plan: dict, image: str, out_root: Path, on_line: Callable[[str], None]) -> tuple[Path, dict]:
    """Bring the topology up until every container has exited, take it down, write the bundle
    to OUT_ROOT/RUN_ID/bundle.json."""
    path = compose_file(topology)
    info = Docker(LocalShell()).inspect_image(image)
    if info is None:
        raise UserError(f"no image {image} on this machine; build it (`make image`) or load it (`make image-load`)")
    run_id = new_run_id()
    out_dir = (out_root / run_id).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    plan_path = out_dir / "plan.json"
    plan_path.write_text(json.dumps(plan))
    shell = LocalShell({**os.environ, "IMAGE": image, "IMAGE_DIGEST": info["Id"], "PLAN": str(plan_path), "OUT": str(out_dir)})
    compose = [*compose_command(shell), "--file", str(path), "--project-name", f"ddpbench-{secrets.token_hex(3)}"]
    started = utc_timestamp()
    try:
        result = shell.stream([*compose, "up", "--no-color"], on_line)
    finally:
        shell.run([*compose, "down", "--volumes"], timeout=120)
    if result.code != 0 and not any(out_dir.glob("*/raw.json")):
        raise DockerError(f"docker compose up of {path} failed: {result.last_error_line()}")
    return write_topology_bundle(path.stem, run_id, out_dir, plan, started)


def write_topology_bundle(topology: str, run_id: str, out_dir: Path, plan: dict, started: str) -> tuple[Path, dict]:
    services = sorted(d for d in out_dir.iterdir() if (d / "raw.json").is_file())
    if not services:
        raise UserError(f"no container of {topology} wrote results under {out_dir}; its output above says why")
    names = [f"{topology}-{service.name}" for service in services]
    grouped = len(services) > 1  # one job over every container
    entries, complete = {}, {}
    for rank, (name, service) in enumerate(zip(names, services)):
        raw = json.loads((service / "raw.json").read_text())
        complete[name] = bool(raw.get("complete"))
        entries[name] = host_entry(
            name=name, runtime="docker", labels=("compose", topology), raw=raw,
            error=None if complete[name] else "the container ended before the plan did",
            group=topology if grouped else None, node_rank=rank if grouped else None)
    gather_group_runs(entries, (tuple(names),) if grouped else ())
    for name, entry in entries.items():
        settle(entry, complete[name])
    incomplete = None if all(complete.values()) else "a container ended before the plan did"
    path = out_dir / "bundle.json"
    return path, write_bundle(path, new_bundle(run_id, started, plan, list(entries.values()), incomplete))
