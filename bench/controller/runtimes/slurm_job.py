"""The batch job a plan becomes on a Slurm cluster (runtime slurm, bench/controller/runtimes/slurm.py):
its sbatch options (where it runs and for how long; the hosts file may add only those SBATCH_ALLOWED
names) and the script that starts one agent per node, node 0 hosting the rendezvous. Every value from
the hosts file is an argv element or shlex-quoted into the script: none is ever read as shell syntax.
"""

from __future__ import annotations

import dataclasses
import math
import shlex

from bench.common.protocol import NODE_RANK_FLAG, Placement
from bench.controller.inventory import Host
from bench.controller.runtimes.base import AgentJob

SCRIPT = "job.sh"
EVENTS = "events.jsonl"  # each node's agent stdout, in node<N>/ of the work folder
DEFAULT_RENDEZVOUS_PORT = 29400
TIME_MARGIN_MIN = 5  # fingerprint, start-up and the agent's own clean-up around the launches
MODULE_FAILED = "ddpbench: module load failed:"  # the batch script's line when a module does not load
# Options that change where and with what the job runs, never its shape, script, output or time
# (ddpbench sets those): the rest of sbatch's options are refused in the hosts file.
SBATCH_ALLOWED = frozenset({
    "--exclusive", "--mem", "--mem-per-cpu", "--mem-per-gpu", "--cpus-per-task", "--cpus-per-gpu", "--gres",
    "--gpu-bind", "--reservation", "--comment", "--nodelist", "--exclude", "--switches", "--licenses",
    "--network", "--hint", "--mail-type", "--mail-user", "--wckey", "--begin", "--prefer", "--tmp",
})


def launch_bound(plan: dict) -> int:
    """How many launches the plan can make at most on one host (each ends after timeout_s)."""
    return sum(
        max(len(part.get("transports", ["default"])) for part in (entry, entry.get("gpu", {}), entry.get("cpu", {})))
        * len(entry.get("world_sizes", ["all"]))
        for entry in plan["suites"]
    )


def time_limit_min(host: Host, plan: dict) -> int:
    if "time_limit_min" in host.slurm:
        return host.slurm["time_limit_min"]
    return math.ceil(launch_bound(plan) * plan["timeout_s"] / 60) + TIME_MARGIN_MIN


def sbatch_options(host: Host, plan: dict) -> list[str]:
    """The job's sbatch options, one argv element each (the shell never sees them)."""
    settings = host.slurm
    options = [
        f"--partition={settings['partition']}", f"--nodes={settings.get('nodes', 1)}", "--ntasks-per-node=1",
        f"--time={time_limit_min(host, plan)}", "--output=job-%j.out", f"--job-name=ddpbench-{host.name}",
    ]
    for key in ("account", "qos", "constraint"):
        if key in settings:
            options.append(f"--{key}={settings[key]}")
    if settings.get("gpus_per_node"):
        options.append(f"--gpus-per-node={settings['gpus_per_node']}")
    return options + list(settings.get("sbatch_options", []))


def batch_script(job: AgentJob) -> str:
    """The script sbatch runs on the job's first node; every value from the hosts file is quoted."""
    host, settings = job.host, job.host.slurm
    nodes = settings.get("nodes", 1)
    if nodes > 1 and host.socket_ifname:  # the bootstrap between the nodes, as a group's
        job = dataclasses.replace(job, extra_env={**job.extra_env, "NCCL_SOCKET_IFNAME": host.socket_ifname,
                                                  "GLOO_SOCKET_IFNAME": host.socket_ifname})
    agent = job.agent_args("../plan.json", "out").argv([host.python, "../agent.pyz"])
    # Each node's agent adds its own node rank: SLURM_NODEID as that node's shell expands it.
    per_node = f'cd "node$SLURM_NODEID" && exec "$@" {NODE_RANK_FLAG} "$SLURM_NODEID" >{EVENTS} 2>agent.err'
    modules = settings.get("modules", [])
    lines = [
        # A login shell sets up `module` (Lmod, Environment Modules) as the cluster's profile defines it.
        "#!/bin/bash -l" if modules else "#!/bin/bash",
        f"# Written by ddpbench for run {job.run_id}, host {host.name}: one agent per node (srun), node 0 hosts the rendezvous.",
        # A module that does not load would leave the job measuring some other Python and torch: it ends the job.
        *(f"module load {shlex.quote(name)} || {{ echo {shlex.quote(f'{MODULE_FAILED} {name}')} >&2; exit 97; }}"
          for name in modules),
        'for n in $(seq 0 $((SLURM_JOB_NUM_NODES - 1))); do mkdir -p "node$n"; done',
    ]
    command = " ".join(shlex.quote(part) for part in agent)
    # Where each node's agent sits is known only in the job: its placement's values are shell words
    # the job expands (bench.common.protocol.Placement), never taken from the hosts file.
    if nodes > 1:
        lines += [
            'first_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            # The address Slurm itself reaches the node at: its NodeAddr (the node name where none is set).
            'first_addr=$(scontrol show node "$first_node" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')',
        ]
        port = int(settings.get("rendezvous_port", DEFAULT_RENDEZVOUS_PORT))
        placement = Placement(nodes, 0, f"${{first_addr:-$first_node}}:{port}", "ddpbench-$SLURM_JOB_ID")
        command += " " + " ".join(f'"{word}"' for word in placement.flags(with_node_rank=False))
    lines.append(f"srun --nodes={nodes} --ntasks-per-node=1 bash -c {shlex.quote(per_node)} bash {command}")
    return "\n".join(lines) + "\n"
