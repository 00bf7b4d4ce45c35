"""`run` and `verify` price a plan before anything launches, as the hosts' agents would (the cost model on
what a light probe reads of each host, at its load now), never by the durations a bundle's author wrote;
past --max-hours nothing launches without a yes. Each case is a shipped plan, or a stranger's precision
(a tiny half-width, 90% of a day's timeout for sampling, 20 launches each), on this machine: verify's a
sealed bundle of that plan made here whose launches each claim to have taken a second."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from bench.agent import runner
from bench.agent.planning import plan_launches
from bench.bundle import write_bundle
from bench.bundle.assembly import host_entry, new_bundle, new_run_id, settle
from bench.common import protocol
from bench.common.host import Capabilities
from bench.common.timestamps import utc_timestamp
from bench.controller.inventory import Host, Inventory
from bench.controller.plans import check, load_plan, plan_names
from bench.controller.pricing import hold, price
from bench.controller.probe import parse_probe, probe
from bench.controller.progress import describe_s
from bench.errors import UserError
from tests.support.cli_in_process import ddpbench
from tests.support.plan_bundles import fingerprint

FORGED_LAUNCH_S = 1.0  # what each launch of the sealed bundle claims to have taken
STRANGER = "a stranger's precision"
LOCAL = Inventory(hosts=(Host(name="local", runtime="local"),))


def plan_of(name: str) -> dict:
    """The plan as the controller sends it to an agent: checked, its defaults written out."""
    if name != STRANGER:
        return load_plan(name)
    plan = load_plan("quick")
    for entry in plan["suites"]:  # each entry's cap on sampling as high as the schema lets it
        for side in (entry["params"], entry.get("cpu", {}), entry.get("gpu", {})):
            side["sampling_cap_s"] = 86400
    return check({**plan, "name": "stranger", "timeout_s": 86400,
                  "precision": {"halfwidth_fraction": 1e-4, "lost_width_fraction": 1e-4, "budget_fraction": 0.9, "launches": 20}},
                 STRANGER)


def plan_file(plan: dict, tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


@pytest.fixture(scope="module")
def here() -> dict:
    """This machine's fingerprint as far as a plan's price reads it: no GPU, its CPU model and cores."""
    read = probe(LOCAL.hosts[0])
    found = fingerprint("H200", 0)
    found["cpu"].update(model=read.cpu_model, logical_cpus=read.cores)
    return found


def sealed_bundle(plan: dict, here: dict, tmp_path: Path) -> Path:
    """The plan's bundle as made on this machine, each of its launches recorded as taking FORGED_LAUNCH_S."""
    launches = [{"id": launch.id, "suite": launch.suite, "preset": launch.preset, "world_size": launch.world_size,
                 "status": "ok", "error": None, "duration_s": FORGED_LAUNCH_S}
                for launch in plan_launches(plan, Capabilities.of(here)) if not launch.skipped_reason]
    entry = host_entry(name="local", runtime="local", labels=(), raw={"fingerprint": here, "launches": launches, "runs": []}, error=None)
    settle(entry, True)
    started = utc_timestamp()
    path = tmp_path / "theirs" / "bundle.json"
    path.parent.mkdir()
    write_bundle(path, {**new_bundle(new_run_id(), started, plan, [entry]), "finished_at": started})
    return path


def agents_own_s(plan: dict, here: dict, tmp_path: Path) -> float:
    """What this machine's agent announces for the plan: its dry run's estimate, the P2P gate included."""
    events = []
    runner.run_plan(plan, tmp_path / "agent", here, dry_run=True, progress=events.append)
    (planned,) = [event for event in events if isinstance(event, protocol.Planned)]
    return sum(planned.estimates_s.values()) + planned.gate_s


def announced_s(stdout: str, command: str) -> float:
    """The seconds of "COMMAND: estimated 4179 h 43 min by the cost model on these hosts", as describe_s writes them."""
    (found,) = re.findall(rf"^{command}: estimated ((?:\d+ (?:h|min|s) ?)+) by the cost model on these hosts", stdout, re.M)
    unit = {"h": 3600, "min": 60, "s": 1}
    return sum(int(count) * unit[name] for count, name in re.findall(r"(\d+) (h|min|s)", found))


def within_twice(said: float, own: float) -> None:
    # describe_s rounds to the second, and to the minute past an hour
    assert own / 2 - 1 <= said <= 2 * own + 1, f"announced {said:.0f} s, the agent's own {own:.0f} s"


def refused_before_anything_ran(done, command: str, max_hours: str, out: Path) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {command} is estimated "), done.stderr
    assert f", past --max-hours {max_hours}; pass --yes to run it anyway, or --max-hours " in lines[0]
    assert not list(out.glob("*/bundle.json")) and not list(out.glob("*/hosts"))


@pytest.mark.parametrize("name", [*plan_names(), STRANGER])
def test_verify_prices_the_rerun_as_this_machines_agent_would_and_says_what_the_bundle_claims(name, here, tmp_path):
    plan = plan_of(name)
    bundle = sealed_bundle(plan, here, tmp_path)
    launches = len(json.loads(bundle.read_text())["hosts"][0]["launches"])
    done = ddpbench("verify", bundle, "--out", tmp_path / "out", "--max-hours", "0.0001")
    refused_before_anything_ran(done, "verify", "0.0001", tmp_path / "out")
    within_twice(announced_s(done.stdout, "verify"), agents_own_s(plan, here, tmp_path))
    claimed = describe_s(launches * FORGED_LAUNCH_S)
    assert f"; the bundle records {claimed} on its own machine ({claimed} of launches and 0 s of start-up)" in done.stdout


@pytest.mark.parametrize("name", [*plan_names(), STRANGER])
def test_run_prices_the_plan_as_this_machines_agent_would(name, here, tmp_path):
    plan = plan_of(name)
    done = ddpbench("run", "--plan", plan_file(plan, tmp_path), "--out", tmp_path / "out", "--max-hours", "0.0001")
    refused_before_anything_ran(done, "run", "0.0001", tmp_path / "out")
    within_twice(announced_s(done.stdout, "run"), agents_own_s(plan, here, tmp_path))


def test_a_strangers_precision_is_refused_at_the_default_bound_whatever_its_bundle_claims(here, tmp_path):
    """Its 60 launches claim a minute; this machine prices them at over ten hours: nothing launches."""
    plan = plan_of(STRANGER)
    for command, argv in (("verify", ["verify", sealed_bundle(plan, here, tmp_path)]),
                          ("run", ["run", "--plan", plan_file(plan, tmp_path)])):
        for bound in ([], ["--max-hours", "0.01"]):
            done = ddpbench(*argv, "--out", tmp_path / "out", *bound)
            refused_before_anything_ran(done, command, bound[-1] if bound else "2", tmp_path / "out")
            assert announced_s(done.stdout, command) > 10 * 3600
            assert ("the bundle records 1 min 00 s on its own machine" in done.stdout) == (command == "verify")


def micro_batches_of_2(name: str) -> dict:
    """The plan with its training entries at micro-batch 2, as a 24 GB card's share of it trains."""
    plan = load_plan(name)
    for entry in plan["suites"]:
        if entry["suite"] in ("ddp", "fsdp"):
            entry["params"]["micro_batch"] = 2
    return check(plan, name)


def test_an_estimate_says_how_much_of_it_the_hosts_cpu_paces(tmp_path):
    """On H100s, GPT-2 Large's and Llama 1B's training micro-batches of 2 wait on the host's CPU launching
    kernels, and such launches took 1.5x longer on one H100 than another: the estimate says how much of it
    they are (its collectives keep the GPUs busy), and the agent names those launches, whose ETA learns this
    host's pace. Where the plan lets the host choose a micro-batch the GPU paces (seed001-sharded's
    gpu-bound), and in quick's GPT-2 at micro-batch 8, nothing is said."""
    h100 = {"local": Capabilities.of(fingerprint("H100", 2))}
    sharded = price(LOCAL, micro_batches_of_2("seed001-sharded"), {"local": None}, known=h100)
    (host,) = sharded.hosts
    assert host.seconds / 2 < host.host_paced_s < host.seconds
    assert sharded.text.endswith(f"(host local: {describe_s(host.host_paced_s)} of it in launches paced by its CPU, "
                                 "not its GPUs, which a slower CPU stretches)")
    assert price(LOCAL, plan_of("seed001-sharded"), {"local": None}, known=h100).hosts[0].host_paced_s == 0
    events = []
    runner.run_plan(micro_batches_of_2("seed001-sharded"), tmp_path, fingerprint("H100", 2), dry_run=True, progress=events.append)
    (planned,) = [event for event in events if isinstance(event, protocol.Planned)]
    assert abs(sum(planned.estimates_s[launch] for launch in planned.host_paced) - host.host_paced_s) < 1
    assert {launch.split("-")[1] for launch in planned.host_paced} == {"ddp", "fsdp"}
    quick = price(LOCAL, plan_of("quick"), {"local": None}, known=h100)
    assert quick.hosts[0].seconds > 0 and quick.hosts[0].host_paced_s == 0
    assert quick.text == f"estimated {describe_s(quick.seconds)} by the cost model on these hosts"


def test_the_bound_asks_at_a_terminal_and_a_no_launches_nothing():
    cost = price(LOCAL, plan_of(STRANGER), {"local": parse_probe("--- devices\n0\n--- cores\n2\n--- load\n0.5\n")})
    asked = []
    with pytest.raises(UserError, match=r"^run is estimated \d+ h \d+ min by the cost model on these hosts, past --max-hours 2; "):
        hold("run", cost, 2.0, False, lambda question: asked.append(question) or False)
    assert asked and asked[0].endswith(", past --max-hours 2: run it? [y/N] ")
    hold("run", cost, 2.0, False, lambda question: True)  # a yes at the prompt
    hold("run", cost, 2.0, True, None)  # --yes


def test_a_host_the_probe_cannot_read_is_said_unpriced_and_a_loaded_cpu_stretches_the_price():
    plan = load_plan("quick")
    idle, busy = (price(LOCAL, plan, {"local": parse_probe(f"--- devices\n0\n--- cores\n2\n--- load\n{load}\n")})
                  for load in (0.5, 8.0))
    assert busy.seconds > 3 * idle.seconds and "host local's CPU 4.0x slower than idle: other processes" in busy.text
    unreadable = price(LOCAL, plan, {"local": "connecting to 127.0.0.2:22: timed out"})
    assert unreadable.seconds == 0 and unreadable.text.startswith("not priced: ") and unreadable.not_priced() == [
        "host local is not priced before it runs (connecting to 127.0.0.2:22: timed out): --max-hours does not bound it"]


def test_the_probe_reads_gpus_memory_pcie_and_load():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n--- topology\n"
            "\tGPU0\tGPU1\nGPU0\t X \tNV18\n--- gpu memory\n81559, 0, 5\n81559, 1024, 5\n--- cpu\nmodel name\t: Intel Xeon\n"
            "--- devices\n2\n--- cores\n32\n--- load\n3.5\n--- memory\n540000000000\n68719476736\n")
    found = parse_probe(text).capabilities()
    assert (found.gpu_count, found.nvlink, found.pcie_gen, found.logical_cpus) == (2, True, 5, 32)
    assert found.gpu_memory_bytes == 81559 << 20 and found.gpu_memory_free_bytes == (81559 - 1024) << 20
    assert parse_probe(text).load == 3.5
    assert found.host_memory_bytes == 64 << 30  # the cgroup's limit, lower than the host's memory
    assert parse_probe(text.replace("68719476736", "max")).capabilities().host_memory_bytes == 540000000000


def test_the_probe_reads_the_memory_this_machines_ranks_may_use_as_its_agent_does():
    from bench.agent.fingerprint import system

    limit = system.memory_limit()
    assert probe(LOCAL.hosts[0]).host_memory_bytes == min(filter(None, [system.memory_total_bytes(), limit and limit[0]]))
