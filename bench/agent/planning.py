"""The launches a plan asks of this host: each entry's transport presets, world sizes, GPU
selections, NCCL algorithms and protocols, every one checked before anything is launched.

The plan arrives already validated against its schema, its defaults written out (by the
controller); what only this host can judge (GPU count, InfiniBand, and each suite's own checks,
beside the suite: memory, batch divisibility) is checked here. An entry's launch_repeats come
round by round over the whole plan (every launch once, then every one again): a machine that
drifts with time then shows it as spread between repeats, not as a difference between launches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from bench import suites
from bench.agent import switches
from bench.common import algorithms, fits
from bench.common import protocol
from bench.common.selection import Side, gpu_sets, side_of, variant
from bench.common.host import Capabilities
from bench.common.sampling import Precision
from bench.common.transports import BASE_NCCL_ENV, PRESETS, Nodes, backend_for
from bench.errors import PlanError


@dataclass
class Launch:
    """One configuration of ranks (a suite, its preset, world size and setting) over an entry's params:
    one launch record and its runs. Launches whose ranks start alike (job_key) may run in one job."""

    id: str
    suite: str
    preset: str
    backend: str
    nproc_per_node: int
    nodes: protocol.Placement
    params: dict
    timeout_s: float
    skipped_reason: str = ""
    env: dict = field(default_factory=dict)
    estimate_s: float = 0.0  # seconds, set by run_plan: an earlier run here (bench.common.history), else the cost model
    configurations: int = 0  # runs it will record, set by run_plan with estimate_s
    threads_per_rank: "int | None" = None  # CPU hosts: the same for every launch of the plan
    repeat: int = 1  # which of the entry's launch_repeats this is
    profiled_in: str = ""  # a repeat on a GPU: its first launch, whose runs profile the kernels (runner.profile_once)
    p2p_off_by_gate: bool = False  # the P2P gate found P2P wrong here and set NCCL_P2P_DISABLE=1 (gate.reroute)
    algorithm: str = algorithms.DEFAULT  # NCCL's algorithm asked for the entry's collectives
    protocol: str = algorithms.DEFAULT
    emulated_nodes: int = 1  # this host's ranks split into this many nodes, each with its own NCCL host id
    gpus: "tuple | None" = None  # the GPUs the ranks use (nvidia-smi index), where the entry names them
    entry_env: dict = field(default_factory=dict)  # the plan entry's own env: part of its runs' identity
    precision: "Precision | None" = None  # the plan's: what its runs sample toward, within what budget

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nodes.nnodes

    @property
    def job_key(self) -> str:
        """What launches that run in one job, the same processes in turn, must share: how the ranks are
        started and placed, and every variable of their environment (NCCL reads its own once per process)."""
        return json.dumps([self.backend, self.nproc_per_node, self.nodes.nnodes, self.nodes.node_rank, self.emulated_nodes,
                           self.gpus, self.threads_per_rank, self.env, self.repeat], sort_keys=True)

    @property
    def topology(self) -> Nodes:
        """Its nodes: the hosts of its job, each split into its emulated nodes."""
        count = self.nodes.nnodes * self.emulated_nodes
        return Nodes(count, self.world_size // count, self.emulated_nodes > 1)


def _threads_per_rank(plan: dict, hw: Capabilities) -> int:
    """On the CPU every rank of the plan gets the threads (and cores) the largest world size leaves
    each rank: a 1-rank baseline with all the cores would compare unlike resources."""
    largest = max((max(fits.world_sizes(e["world_sizes"], hw)) for e in plan["suites"]), default=1)
    return max(1, hw.logical_cpus // largest)


def plan_launches(plan: dict, hw: Capabilities, nodes: protocol.Placement = protocol.Placement(), host_env: "dict | None" = None) -> list[Launch]:
    """Every launch the plan asks of this host, or a PlanError naming the first problem. In a job of
    several nodes, the launches of the first node alone (span: first_node) come last: the other nodes
    have ended by then, rather than wait at the next launch's rendezvous while its timeout runs."""
    planner = _Planner(hw, nodes, host_env or {}, plan["timeout_s"], _threads_per_rank(plan, hw), Precision.of(plan))
    for index, entry in enumerate(plan["suites"]):
        suite, side, worlds, nnodes = planner.scope(index, entry)
        planner.settled = suite.settled_together(side.params, hw, [ranks * nnodes for ranks in worlds], nnodes * side.nodes,
                                                 planner.settled)
    launches = [launch for index, entry in enumerate(plan["suites"]) for launch in planner.entry_launches(index, entry)]
    # Round by round, each in the plan's order but for the launches of one job, which run one after the other.
    ordered = sorted(launches, key=lambda launch: (launch.nodes.nnodes < nodes.nnodes, launch.repeat))
    return [launch for job in jobs(ordered, every=True) for launch in job]


@dataclass
class _Planner:
    """What planning one entry needs from the plan and the host, and the configurations planned so far."""

    hw: Capabilities
    nodes: protocol.Placement
    host_env: dict
    timeout_s: float
    threads_per_rank: int  # on the CPU
    precision: "Precision | None" = None
    first_of: dict = field(default_factory=dict)  # configuration -> the launch that runs it
    settled: dict = field(default_factory=dict)  # what the plan's entries decide together (Suite.settled_together)

    @property
    def cuda(self) -> bool:
        return self.hw.cuda

    def scope(self, index: int, entry: dict) -> tuple:
        """(suite, side, world sizes a node, nodes) of the entry's launches on this host, its axes checked."""
        side = side_of(entry, self.cuda)
        suite = suites.get(entry["suite"], f"the plan's suites[{index}]")
        found = (fits.side_problem(side, entry["world_sizes"], self.hw, {**entry.get("env", {}), **self.host_env})
                 or algorithms.env_problem(entry.get("env", {}), side.algorithms, side.protocols))
        if found:
            raise PlanError(f"{entry['suite']}: {found}")
        worlds = [2] if side.pairs else fits.world_sizes(entry["world_sizes"], self.hw, side.gpus)
        return suite, side, worlds, self._placement(side).nnodes

    def entry_launches(self, index: int, entry: dict) -> list[Launch]:
        """The entry's launches, a transport preset, world size, GPU selection, algorithm and protocol
        each, checked before any is run."""
        suite, side, worlds, nnodes = self.scope(index, entry)
        side = replace(side, params=suite.resolved_params(side.params, self.hw, [ranks * nnodes for ranks in worlds],
                                                          nnodes * side.nodes, self.settled))
        typed = suite.params(side.params)
        launches = []
        for preset_name in side.transports:
            for per_node in worlds:
                self._check_nodes(entry, side, per_node)
                for gpus in gpu_sets(side, self.hw.gpu_count, per_node):
                    for algorithm in side.algorithms:
                        for protocol_name in side.protocols:
                            self._check_algorithm(suite, typed, side, per_node, algorithm, protocol_name)
                            suite.check_plan(typed, self.hw, world_size=per_node * nnodes, transport=preset_name,
                                             nodes=nnodes * side.nodes)
                            launches.append(self._launch(index, entry, side, preset_name, per_node, gpus, algorithm, protocol_name,
                                                         [ranks * nnodes for ranks in worlds]))
        again = [launch for launch in launches if not launch.skipped_reason]
        # A configuration's kernels are profiled once, by its first launch: a repeat's kernels are the same
        # work, and its profiled steps and their reading (a UNet's: 3-4 steps' time) would be spent again.
        profiled = self.cuda and getattr(typed, "profile_steps", 0) > 0
        return launches + [replace(launch, id=_launch_id(index, launch, repeat), repeat=repeat,
                                   profiled_in=launch.id if profiled else "")
                           for repeat in range(2, side.launch_repeats + 1) for launch in again]

    def _placement(self, side: Side) -> protocol.Placement:
        """Where the entry's launches sit: this host's place in its job, or one node alone (span: first_node)."""
        return self.nodes if side.job_nodes(self.nodes.nnodes) == self.nodes.nnodes else protocol.Placement()

    def _check_nodes(self, entry: dict, side: Side, per_node: int) -> None:
        if side.pairs and entry["world_sizes"] != [2]:
            raise PlanError(f"{entry['suite']}: pairs: all runs two ranks a pair, and the entry asks world sizes "
                            f"{entry['world_sizes']}; set world_sizes: [2]")
        if per_node % side.nodes and per_node in entry["world_sizes"]:
            raise PlanError(f"{entry['suite']}: nodes: {side.nodes} splits each launch's ranks into {side.nodes} nodes, and world "
                            f"size {per_node} does not divide; use world sizes that are multiples of {side.nodes}")

    def _check_algorithm(self, suite, typed, side: Side, per_node: int, algorithm: str, protocol_name: str) -> None:
        """NCCL's algorithm and protocol asked (over NCCL: fits.nccl_axes_problem), for collectives that have them, on
        an NCCL that takes them one collective at a time."""
        if (algorithm, protocol_name) == (algorithms.DEFAULT, algorithms.DEFAULT):
            return
        found = (algorithms.version_problem(self.hw.nccl_version)
                 or algorithms.problem(suite.nccl_collectives(typed), algorithm, protocol_name,
                                       ranks_per_node=max(1, per_node // side.nodes)))
        if found:
            raise PlanError(f"{suite.name}: {found}")

    def _launch(self, index: int, entry: dict, side: Side, preset_name: str, per_node: int, gpus: "tuple | None",
                algorithm: str, protocol_name: str, world_sizes: "list[int]") -> Launch:
        nodes = self._placement(side)
        suite, world_size = entry["suite"], per_node * nodes.nnodes
        backend = backend_for(preset_name, self.cuda)
        first = (side.transports[0], side.algorithms[0], side.protocols[0])
        skipped = ""
        if nodes.nnodes < self.nodes.nnodes and self.nodes.node_rank != 0:
            skipped = f"span: {side.span} runs it on the job's first node alone"
        elif self.cuda and per_node > self.hw.gpu_count:
            skipped = f"needs {per_node} GPUs per node, this host has {self.hw.gpu_count}"
        elif gpus is not None and len(gpus) < per_node:
            skipped = f"needs {per_node} GPUs per node, the entry's gpus names {len(gpus)}"
        elif world_size == 1 and preset_name != first[0]:
            skipped = f"one rank uses no link: its run is the one under {first[0]!r}"
        elif world_size == 1 and (algorithm, protocol_name) != first[1:]:
            skipped = f"one rank runs no collective over a link: its run is the one under algorithm {first[1]!r}, protocol {first[2]!r}"
        elif world_size == 1 and 1 not in entry["world_sizes"] and suites.get(suite).needs_two_ranks:
            skipped = (f"world size all is one {'GPU' if self.cuda else 'process'} on this host, and {suite} over one rank "
                       "crosses no link (busbw is 0 by definition); give world_sizes: [1] to run it anyway")
        elif per_node % side.nodes:
            skipped = f"world size all is {per_node} here, which {side.nodes} nodes do not divide"
        if world_size == 1 and not skipped:  # one rank runs no collective over a link: nothing to ask of NCCL
            algorithm = protocol_name = algorithms.DEFAULT
        typed = suites.get(suite).params(side.params)
        functions = [function for _, function in suites.get(suite).nccl_collectives(typed) if function]
        entry_env = dict(entry.get("env", {}))
        env = {**(BASE_NCCL_ENV if backend == "nccl" else {}), **PRESETS[preset_name].env_for(nodes.nnodes * side.nodes),
               **(algorithms.env_for(functions, algorithm, protocol_name) if backend == "nccl" else {}), **entry_env,
               # nvidia-smi's order, which gpus: and the fingerprint's topology name
               **({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))} if gpus is not None else {}),
               **self.host_env}
        if not self.cuda:
            env.setdefault("OMP_NUM_THREADS", str(self.threads_per_rank))
        # Overrides may map two entries onto one configuration (the CPU's tiny model for
        # gpt2 and gpt2-large): it runs once, or its baseline would be counted twice.
        configuration = json.dumps([suite, preset_name, per_node, nodes.nnodes, side.nodes, side.params, env], sort_keys=True)
        if not skipped and configuration in self.first_of:
            skipped = f"the same configuration as launch {self.first_of[configuration]}, which runs it once"
        launch = Launch(
            id="", suite=suite, preset=preset_name, backend=backend, nproc_per_node=per_node, nodes=nodes,
            params=suites.get(suite).one_rank_params(side.params, world_sizes) if world_size == 1 else side.params,
            timeout_s=self.timeout_s, skipped_reason=skipped, env=env,
            threads_per_rank=None if self.cuda else int(env["OMP_NUM_THREADS"]),
            algorithm=algorithm, protocol=protocol_name, emulated_nodes=side.nodes, gpus=gpus, entry_env=entry_env,
            precision=self.precision,
        )
        launch.id = _launch_id(index, launch)
        self.first_of.setdefault(configuration, launch.id)
        return launch


def _launch_id(index: int, launch: Launch, repeat: int = 1) -> str:
    return protocol.launch_id(index, launch.suite, launch.preset, launch.world_size, repeat,
                              variant(launch.algorithm, launch.protocol, launch.emulated_nodes, launch.gpus))


def jobs(launches: "list[Launch]", every: bool = False) -> "list[list[Launch]]":
    """The launches to run (`every`: skipped ones too, each on its own), grouped into jobs in the order of
    their first launch: those of one job_key together, on one node (a job over several hosts is one
    launch: its agents could group apart)."""
    shared = switches.on(switches.SHARED_JOBS)
    found: dict = {}
    for launch in launches:
        alone = launch.skipped_reason or not shared or launch.nodes.nnodes > 1
        if every or not launch.skipped_reason:
            found.setdefault(launch.id if alone else launch.job_key, []).append(launch)
    return list(found.values())
