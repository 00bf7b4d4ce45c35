"""Where a plan runs, as the controller holds it once a hosts file is read (bench/controller/hosts.py):
its hosts, and the groups of hosts that run one multi-node job."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    price_per_hour: "float | None" = None  # USD, the whole machine
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
