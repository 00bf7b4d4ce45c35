"""Where a host's launch time went, from the phases each launch record holds (bench.common.protocol
PHASES): what `ddpbench run` says at its end, and what the cost model's start-up figures are
measured from (benchmarks/launch_costs.py)."""

from __future__ import annotations

from bench.common.protocol import PHASES, START_PHASES

# The phases said together: a job's start-up (the processes, their imports, the devices, the process group).
GROUPS = {"start-up": START_PHASES, **{name: (name,) for name in PHASES if name not in START_PHASES}}
SAID = 3  # the costs named beside the measured share


def phase_totals(launches: "list[dict]") -> "dict[str, float]":
    """Seconds per phase over the launches that record their phases."""
    totals = dict.fromkeys(PHASES, 0.0)
    for launch in launches:
        for name, seconds in (launch.get("phases") or {}).items():
            totals[name.removesuffix("_s")] += seconds
    return totals


def summary_line(host: str, launches: "list[dict]") -> "str | None":
    """"host local: 111 s in 9 launches (6 jobs), measured 13 s (12%); the most beside it: start-up 45 s
    (41%), build 17 s (15%), teardown 9 s (8%)"; None where no launch recorded its phases."""
    timed = [launch for launch in launches if launch.get("phases")]
    total = sum(launch["duration_s"] for launch in timed)
    if not timed or total <= 0:
        return None
    totals = phase_totals(timed)
    grouped = {group: sum(totals[name] for name in names) for group, names in GROUPS.items()}
    measured = grouped.pop("measured")
    most = sorted(grouped.items(), key=lambda item: -item[1])[:SAID]
    jobs = len({launch.get("job", launch["id"]) for launch in timed})
    return (f"host {host}: {total:.0f} s in {len(timed)} launch{'es' if len(timed) != 1 else ''} ({jobs} job{'s' if jobs != 1 else ''}), "
            f"measured {measured:.1f} s ({measured / total:.0%}); the most beside it: "
            + ", ".join(f"{group} {seconds:.0f} s ({seconds / total:.0%})" for group, seconds in most))


def summary_lines(bundle: dict) -> "list[str]":
    """One line per host of the bundle whose launches recorded where their time went."""
    lines = [summary_line(host["name"], host.get("launches") or []) for host in bundle["hosts"]]
    return [f"launch time: {line}" for line in lines if line]
