"""Hosts files: where a plan runs (YAML, validated against schema/hosts.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench import schemas
from bench.errors import UserError
from bench.yamlfile import load_yaml


@dataclass(frozen=True)
class Host:
    name: str
    runtime: str = "native"
    address: str = ""
    port: int = 22
    user: str = "root"
    identity_file: str = ""
    jump: str = ""
    python: str = "python3"
    workdir: str = "/tmp/ddpbench"
    labels: tuple = ()
    env: dict = field(default_factory=dict)
    accept_new_host_key: bool = False
    known_hosts_file: str = "~/.ssh/known_hosts"
    connect_timeout_s: float = 15.0
    command_timeout_s: float = 120.0
    keepalive_s: float = 15.0
    socket_ifname: str = ""
    image: str = ""
    image_tarball: str = ""
    slurm: dict = field(default_factory=dict)  # runtime slurm: the job's settings (schema/hosts.schema.json)


@dataclass(frozen=True)
class Group:
    """Hosts that run one multi-node job; the first hosts the rendezvous (node rank 0)."""

    name: str
    hosts: tuple
    rendezvous_address: str = ""
    rendezvous_port: int = 29400
    socket_ifname: str = ""


@dataclass(frozen=True)
class Inventory:
    hosts: tuple
    groups: tuple = ()

    def group_of(self, name: str) -> "Group | None":
        return next((g for g in self.groups if name in g.hosts), None)


def load_hosts(path: Path) -> Inventory:
    document = load_yaml(path, "hosts file")
    schemas.validate("hosts", document, str(path), "fix the hosts file (schema/hosts.schema.json lists what is allowed)")
    defaults = document.get("defaults", {})
    hosts = []
    for entry in document["hosts"]:
        merged = {**defaults, **entry, "env": {**defaults.get("env", {}), **entry.get("env", {})},
                  "slurm": {**defaults.get("slurm", {}), **entry.get("slurm", {})}}
        merged["labels"] = tuple(merged.get("labels", ()))
        # No address: this machine, by itself (local) or through its Docker engine (docker).
        if merged.get("runtime", "native") not in ("local", "docker") and not merged.get("address"):
            raise UserError(f"{path}: host {entry['name']!r} has no address; give its address or set runtime: local")
        runtime = merged.get("runtime", "native")
        if runtime == "slurm" and "partition" not in merged.get("slurm", {}):
            raise UserError(f"{path}: host {entry['name']!r} has runtime slurm but no slurm: partition; add slurm: {{partition: NAME}} (sinfo lists them)")
        if runtime != "slurm" and merged.get("slurm"):
            raise UserError(f"{path}: host {entry['name']!r} has slurm: settings but runtime {runtime}; set runtime: slurm or remove them")
        hosts.append(Host(**merged))
    names = [h.name for h in hosts]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise UserError(f"{path}: host name {duplicate!r} is used twice; give each host its own name")
    by_name = {h.name: h for h in hosts}
    groups, grouped = [], {}
    for entry in document.get("groups", []):
        unknown = [n for n in entry["hosts"] if n not in names]
        if unknown:
            raise UserError(f"{path}: group {entry['name']!r} names unknown host {unknown[0]!r}; list it under hosts or fix the name")
        for name in entry["hosts"]:
            if name in grouped:
                raise UserError(f"{path}: host {name!r} is in groups {grouped[name]!r} and {entry['name']!r}; a host joins one group at most")
            if by_name[name].runtime in ("local", "slurm"):
                raise UserError(f"{path}: group {entry['name']!r}: host {name!r} has runtime {by_name[name].runtime}; a group's hosts need "
                                "runtime native or docker (a slurm job spans nodes by itself: set slurm: nodes)")
            if not by_name[name].address:
                raise UserError(f"{path}: group {entry['name']!r}: host {name!r} has no address; a group's hosts need one (the others reach it there)")
            grouped[name] = entry["name"]
        groups.append(Group(**{**entry, "hosts": tuple(entry["hosts"])}))
    return Inventory(hosts=tuple(hosts), groups=tuple(groups))
