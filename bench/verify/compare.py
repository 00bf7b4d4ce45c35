"""Configuration-by-configuration comparison of an original bundle with a new one: matching, ratios, verdicts.

A configuration's identity is (host, suite, params, transport preset, world size, and the setting it
ran under: NCCL's algorithm and protocol asked, its nodes, its GPUs, its entry's env); the runs of
one configuration in several repeats of its launch (launch_repeats) are judged together. Hosts pair by name when
every original host name is among the new ones, otherwise by position (the first original host
with the first new one, ...); explicit pairs (--host-map orig=new) come first.
"""

from __future__ import annotations

import bisect
import json
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from bench import suites
from bench.bundle import IMPORTED
from bench.common.protocol import parse_launch_id
from bench.common.run import Run
from bench.common import launch_floor
from bench.common.sampling import sampling_outcome
from bench.common.stats import Launches, Ratio, Side, Spread, combined_df, cv, family_level, percent, ratio_interval, t_quantile
from bench.common.transports import nccl_algorithms, setting_key, with_setting
from bench.errors import UserError
from bench.judging import shared_machine
from bench.judging.cpu_pace import pace_ns, pace_words
from bench.suites.training.pacing import ADVICE, HOST_PACED
from bench.verify.machines import differences

DEFAULT_TOLERANCE = 0.05
VERDICTS = ("reproduced", "inconclusive", "faster", "slower", "not comparable", "failed", "incomplete")


def refuse_smoke(bundle: dict, path: Path) -> None:
    """A smoke run's bundle (`ddpbench run --smoke`) holds no measurements: there is nothing to judge."""
    if bundle.get("smoke"):
        raise UserError(f"{path}: a smoke run's bundle (ddpbench run --smoke), whose figures are no measurements; "
                        "judge the bundle of a run without --smoke")


def rerun_stopped(new: dict) -> "str | None":
    """Why the new bundle's run stopped before its end ("interrupted (SIGTERM)"), or None: it ran to its end."""
    return None if new["complete"] else new.get("incomplete_reason") or "early"


def stopped_before(stopped: str, what: str) -> str:
    """"the rerun was stopped (interrupted (SIGTERM)) before it measured this run"."""
    return f"the rerun was stopped ({stopped}) before it measured {what}"


def refuse_imported(bundle: dict, path: Path) -> None:
    """An imported bundle (`ddpbench import`) has no plan: nothing to rerun."""
    if bundle["kind"] == IMPORTED:
        raise UserError(f"{path}: an imported bundle ({bundle['imported']['format']}'s result), which has no plan to rerun; "
                        "run your own sweep (ddpbench run) and judge the two with `ddpbench compare`")


def imported(*bundles: dict) -> bool:
    """Whether a bundle of the comparison was imported: its runs are then matched to the other's by what
    each call measured (its suite's configuration), whatever harness timed them."""
    return any(bundle["kind"] == IMPORTED for bundle in bundles)


def higher_is_better(metric: str) -> bool:
    """Bandwidths, rates and fractions grow when things get faster; times shrink."""
    return metric.endswith(("_gbps", "_per_s", "_fraction"))


def parse_tolerances(items: "list[str]") -> dict:
    """`0.1` (every metric) or `busbw_gbps=0.1`; a trailing % divides by 100. A bare number of 1 or more
    is refused: it is a percentage written without its %, far more often than a band of a factor 2 or more."""
    tolerances = {suite.headline_metric: DEFAULT_TOLERANCE for suite in suites.registry().values()}
    for item in items:
        metric, _, text = item.rpartition("=")
        try:
            value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            value = -1.0
        if not 0 < value < math.inf:
            raise UserError(f"--tolerance {item}: {text!r} is not a positive finite number; write e.g. 0.05 or 5%")
        if value >= 1 and not text.endswith("%"):  # "5" meant as 5% would silently pass runs 6 times slower
            raise UserError(f"--tolerance {item}: a bare number is a fraction, so {text} would be {value:.0%}; "
                            f"write {text}% (or {value / 100:g}), or {value:.0%} if that is what you mean")
        if metric and metric not in tolerances:
            raise UserError(f"--tolerance {item}: {metric!r} is not a compared metric; use one of {', '.join(sorted(tolerances))}")
        for name in [metric] if metric else list(tolerances):
            tolerances[name] = value
    return tolerances


def parse_host_map(items: "list[str]") -> dict:
    pairs = {}
    for item in items:
        original, sep, new = item.partition("=")
        if not sep or not original or not new:
            raise UserError(f"--host-map {item}: write ORIGINAL=NEW, the host's name in the original bundle and in yours")
        if original in pairs:
            raise UserError(f"--host-map: host {original!r} is mapped twice; map each original host once")
        pairs[original] = new
    return pairs


def match_hosts(original: "list[str]", new: "list[str]", explicit: dict) -> tuple[list[tuple], str]:
    """[(original name, new name or None)] in the original's order, and how they were paired."""
    for name in explicit:
        if name not in original:
            raise UserError(f"--host-map: {name!r} is not a host of the original bundle ({', '.join(original)})")
    for name in explicit.values():
        if name not in new:
            raise UserError(f"--host-map: {name!r} is not one of the new hosts ({', '.join(new)})")
    rest_original = [n for n in original if n not in explicit]
    rest_new = [n for n in new if n not in explicit.values()]
    by_name = all(n in rest_new for n in rest_original)
    paired = {n: n for n in rest_original} if by_name else dict(zip(rest_original, rest_new))
    paired.update(explicit)
    rule = "by name" if by_name else "by order in the plan's hosts"
    return [(n, paired.get(n)) for n in original], (rule + " and --host-map" if explicit else rule)


# How long a run sampled and warmed up, not what it measured: a rerun may set them otherwise.
SAMPLING_PARAMS = frozenset({"cv_target", "sampling_cap_s", "warmup_max_steps", "warmup_tolerance", "launch_repeats",
                             "timeline_steps", "micro_batch_auto"})


def measured(params: dict) -> dict:
    return {k: v for k, v in params.items() if k not in SAMPLING_PARAMS}


def run_key(run: Run) -> tuple:
    return (run.suite, json.dumps(measured(run.params), sort_keys=True), run.preset, run.world_size,
            *setting_key(run))


def call_key(run: Run) -> tuple:
    """What one call measured, whoever timed it and how often: where an imported bundle is compared."""
    return (run.suite, suites.get(run.suite).configuration(run), run.preset, run.world_size, *setting_key(run))


@dataclass
class RunVerdict:
    host: str
    new_host: "str | None"
    suite: str
    params: dict
    transport: str
    world_size: int
    metric: str
    verdict: str
    original_median: "float | None" = None
    new_median: "float | None" = None
    ratio: "float | None" = None
    ci_low: "float | None" = None
    ci_high: "float | None" = None
    tolerance: "float | None" = None
    level: "float | None" = None  # the interval's: every compared run's holds together at stats.LEVEL
    differs: list = field(default_factory=list)  # fingerprint or transport fields that differ
    reason: "str | None" = None
    inconclusive_because: "str | None" = None  # one of INCONCLUSIVE_BECAUSE
    noise_floor: "float | None" = None  # where inconclusive: the tolerance an identical rerun could be judged to
    between_launches: "dict | None" = None  # per side: the spread between launches its interval took (between_launches)
    sampled: "dict | None" = None  # per side: whether its sampling met the plan's precision target (sampling_outcome)
    pacing: "dict | None" = None  # per side: what paced its steps (Pacing.short), where its suite says

    def to_json(self) -> dict:
        return asdict(self)


def band(tolerance: float) -> tuple[float, float]:
    """The ratios that count as the same: within a factor 1 + tolerance either way."""
    return 1 / (1 + tolerance), 1 + tolerance


def inside_band(low: float, high: float, tolerance: float) -> bool:
    """Whether the interval [low, high] of a ratio lies wholly inside the band."""
    edges = band(tolerance)
    return edges[0] <= low and high <= edges[1]


def fitting_tolerance(low: "float | None", high: "float | None") -> "int | None":
    """The least whole percent of tolerance whose band holds the whole interval [low, high] (a rerun
    judged with it is reproduced); None where there is no interval, so no tolerance settles it."""
    if low is None or high is None or low <= 0:
        return None
    percent = max(1, math.floor((max(high, 1 / low) - 1) * 100))
    while not inside_band(low, high, percent / 100):  # the float rounding of a percent, at most a step or two
        percent += 1
    return percent


def verdict_of(ratio: Spread, tolerance: float, metric: str) -> str:
    """"reproduced" when the ratio's whole interval lies inside the band, "faster"/"slower" when it
    lies wholly outside (the metric's direction decides which), "inconclusive" when it straddles an edge."""
    low, high = band(tolerance)
    if ratio.low is None:
        return "inconclusive"
    if inside_band(ratio.low, ratio.high, tolerance):
        return "reproduced"
    if ratio.high < low or ratio.low > high:
        return "faster" if (ratio.median > 1) == higher_is_better(metric) else "slower"
    return "inconclusive"


# Why an interval straddles the band, in the order they are looked for: what the reader can do
# differs for each (rerun on a quiet machine, more launches, a wider tolerance, more samples).
INCONCLUSIVE_BECAUSE = ("busy machine", "host-paced", "launches differ", "noise floor", "too few samples", "no interval")
MOST_LAUNCHES = 20  # a plan entry's launch_repeats at most (schema/plan.schema.json)


def _spread(launches: "tuple") -> str:
    pooled = [x for launch in launches for x in launch]
    over = f" over {len(launches)} launches" if len(launches) > 1 else ""
    return f"{cv(pooled):.1%} n={len(pooled)}{over}"


def _parts(ratio: Ratio) -> tuple[float, float]:
    """The ratio's log variance split: (between launches, within them)."""
    sides = (ratio.numerator, ratio.denominator)
    return sum(s.between ** 2 / s.launches for s in sides), sum(s.within ** 2 / s.launches for s in sides)


def _reach(ratio: Ratio, launches: "int | None" = None) -> float:
    """Half the interval's width on the log scale; with `launches` a side, as spread as its own."""
    sides = [(s.variance(launches), s.df - s.launches + (launches or s.launches)) for s in (ratio.numerator, ratio.denominator)]
    return t_quantile(1 - (1 - ratio.level) / 2, combined_df(sides)) * math.sqrt(sum(v for v, _ in sides))


def judged_to(original: Side, level: float) -> float:
    """The tolerance a rerun identical to the original (as many launches and samples, as spread) could be
    judged to: the far end of the interval of their ratio."""
    same = Ratio(1.0, None, None, original.samples, original, original, None, level)
    return math.exp(_reach(same)) - 1


def _launches_to_fit(ratio: Ratio, room: float) -> "int | None":
    """The fewest launches a side (at most MOST_LAUNCHES) whose interval would fit `room` on the log scale."""
    counts = range(2, MOST_LAUNCHES + 1)
    first = bisect.bisect_left(counts, True, key=lambda k: _reach(ratio, k) <= room)  # the reach narrows as launches grow
    return counts[first] if first < len(counts) else None


def why_inconclusive(ratio: Ratio, tolerance: float, original: Launches, new: Launches,
                     shares: tuple = (None, None), paced: tuple = (None, None)) -> "tuple[str, str, float | None]":
    """(one of INCONCLUSIVE_BECAUSE, what it means and what would settle it, the tolerance a rerun
    identical to the original could be judged to)."""
    if ratio.low is None:
        return "no interval", "the new median is 0, or the interval reaches past a float's range: no interval", None
    floor = judged_to(ratio.denominator, ratio.level)
    straddles = f"the {percent(ratio.level)} interval straddles the band +-{tolerance:.3g}"
    busy = shared_machine.verdict_reason(shares)
    if busy:
        return "busy machine", f"a busy machine: {straddles}, and {busy}", floor
    host_paced = [f"{side} {p.words()}" for side, p in zip(("original", "new"), paced) if p is not None and p.verdict == HOST_PACED]
    if host_paced:
        one = min(ratio.numerator.launches, ratio.denominator.launches) == 1
        return "host-paced", (
            f"steps paced by the host, not the GPU ({'; '.join(host_paced)}): {straddles}, and such steps move "
            f"{max(original.floor.fraction, new.floor.fraction):.0%} or more from one launch to the next"
            + (", which one launch a side cannot show" if one else "")
            + f"; to judge the link, {ADVICE}"), floor
    room = math.log(1 + tolerance) - abs(math.log(ratio.median))
    between, within = _parts(ratio)
    if between > within:
        launches = _launches_to_fit(ratio, room) if room > 0 else None
        settle = (f"about {launches} launches a side would narrow it to fit the band (the entry's launch_repeats, or the "
                  f"plan's precision: launches)" if launches else
                  f"the ratio {ratio.median:.3f} lies at the band's edge: more launches tell on which side" if room <= 0 else
                  f"more than {MOST_LAUNCHES} launches a side would be needed: judge it with "
                  f"--tolerance {fitting_tolerance(ratio.low, ratio.high)}%, within which its interval lies")
        return "launches differ", (
            f"launches differ more than samples do: {straddles}, and the spread between launches makes "
            f"{between / (between + within):.0%} of its width ({between_words(ratio)}); more samples do not settle it: "
            f"{settle}"), floor
    if floor > tolerance:
        return "noise floor", (
            f"noise floor above the tolerance: a rerun identical to the original (CV {_spread(original.samples)}) would get an "
            f"interval reaching +-{floor:.1%}, so the original can be judged to about {floor:.0%}, not to {tolerance:.0%} "
            f"(new: CV {_spread(new.samples)}); judge it with --tolerance {fitting_tolerance(ratio.low, ratio.high)}%, within "
            f"which its interval lies, or raise the entry's repetitions or steps, or the plan's precision target"), floor
    count = min(ratio.numerator.samples, ratio.denominator.samples)
    t_room = room / t_quantile(1 - (1 - ratio.level) / 2, ratio.df) if room > 0 else 0.0
    factor = within / (t_room ** 2 - between) if t_room ** 2 > between else None
    settle = (f"about {math.ceil(count * factor)} samples a side (now {count}) would narrow it to fit the band" if factor
              else f"the ratio {ratio.median:.3f} lies at the band's edge: more samples tell on which side")
    return "too few samples", (f"too few samples: {straddles} (CV original {_spread(original.samples)}, new {_spread(new.samples)}); "
                               f"{settle}: raise the entry's repetitions or steps, or the plan's precision target"), floor


def side_words(side: Side) -> str:
    """"3 launches 1.2% apart" or "one launch: the floor 2.2%": the spread between launches a side took."""
    if side.measured_between is None:
        return f"one launch: the floor {side.floor.fraction:.1%}" + ("" if side.floor.measured else " (a default)")
    return f"{side.launches} launches {side.measured_between:.1%} apart beyond their samples"


def between_words(ratio: Ratio) -> str:
    return f"original {side_words(ratio.denominator)}; new {side_words(ratio.numerator)}"


def between_launches(side: Side) -> dict:
    """What a side's interval took for the spread between launches (verdict.json)."""
    return {"launches": side.launches, "measured_fraction": side.measured_between, "taken_fraction": side.between,
            "floor_fraction": side.floor.fraction, "floor_measured": side.floor.measured, "floor": side.floor.source}


def _why_not_positive(base: RunVerdict) -> str:
    if base.metric == "busbw_gbps" and base.world_size == 1:
        # nccl-tests' bus bandwidth counts (n-1)/n of the bytes: zero at one rank, on any machine.
        return "one rank sends nothing over a link, so its busbw is 0 by definition; the runs on 2 or more GPUs carry the comparison"
    return f"the original median of {base.metric} is not positive"


def _with_metric(runs: "list[Run]", metric: str) -> "list[Run]":
    return [r for r in runs if r.ok and metric in r.metrics]


@dataclass(frozen=True)
class Measured:
    """A configuration both bundles measured: its verdict waits for the level of the whole comparison."""

    base: RunVerdict
    original: Launches  # the original's samples, one tuple per launch that measured it, with their floor
    new: Launches
    shares: tuple  # the CPU share other processes took: (original, new)
    sampled: tuple  # how each side's sampling ended: (original, new), sampling_outcome's
    paced: tuple = (None, None)  # what paced each side's steps (a Pacing, or None where its suite cannot say)
    paces: tuple = (None, None)  # each side's host CPU pace, a Python call's ns (None: not recorded)


def _compare_configuration(base: RunVerdict, runs: "list[Run]", new_runs: "list[Run]", machine_differs: list,
                           new_error: "str | None", shares: tuple = (None, None), stopped: "str | None" = None,
                           imported_side: bool = False, paces: tuple = (None, None)) -> "RunVerdict | Measured":
    """The verdict of one configuration measured by `runs` (one per repeat of its launch) and by
    `new_runs` in the new bundle, or, where both measured it, what judge() needs. `stopped`: why the new
    bundle's run stopped early (a stop signal): a run it never reached is incomplete, no evidence."""
    if not any(r.ok for r in runs):
        return replace(base, verdict="not comparable", reason=f"the original run did not succeed ({runs[0].status}: {runs[0].error})")
    runs = _with_metric(runs, base.metric)
    if not runs:
        return replace(base, verdict="not comparable", reason=f"the original run has no {base.metric}")
    base = replace(base, original_median=statistics.median([x for run in runs for x in run.samples(base.metric)]))
    if machine_differs:
        return replace(base, verdict="not comparable", differs=machine_differs)
    if base.original_median <= 0:  # nothing to compare with, whatever the rerun did (or skipped: one-rank busbw)
        return replace(base, verdict="not comparable", reason=_why_not_positive(base))
    if not new_runs and stopped:
        return replace(base, verdict="incomplete", reason=stopped_before(stopped, "this run"))
    if not new_runs:
        if imported_side:  # two tools' sweeps: what only one of them measured is no loss
            return replace(base, verdict="not comparable", reason="the other bundle did not measure it")
        return replace(base, verdict="failed", reason=new_error or "the new bundle has no such run")
    if not any(r.ok for r in new_runs):
        return replace(base, verdict="failed", reason=f"{new_runs[0].status}: {new_runs[0].error or 'no error recorded'}")
    new_runs = _with_metric(new_runs, base.metric)
    if not new_runs:
        return replace(base, verdict="failed", reason=f"the new run has no {base.metric}")
    used = (runs[0].transport.get("nccl_used"), new_runs[0].transport.get("nccl_used"))
    if used[0] != used[1] and not (imported_side and not all(used)):  # an import without its NCCL log does not say
        return replace(base, verdict="not comparable", differs=[{"field": "nccl_transport", "original": used[0], "new": used[1]}])
    ran = (nccl_algorithms(runs[0].transport), nccl_algorithms(new_runs[0].transport))
    if None not in ran and ran[0] != ran[1]:  # NCCL's own choice moved (another version, a tuner): another measurement
        return replace(base, verdict="not comparable", differs=[{"field": "nccl_algorithm", "original": ran[0], "new": ran[1]}])
    suite = suites.get(base.suite)
    paced = (suite.pacing(runs), suite.pacing(new_runs))
    original, new = (launch_floor.launches(side, base.metric, pacing=p and p.verdict) for side, p in zip((runs, new_runs), paced))
    return Measured(base, original, new, shares, (sampling_outcome(runs), sampling_outcome(new_runs)), paced, paces)


def judge(measured: Measured, tolerances: dict, level: float) -> RunVerdict:
    """The verdict of a configuration both bundles measured: its ratio's interval, at `level`, against the band."""
    base = replace(measured.base, sampled={"original": measured.sampled[0], "new": measured.sampled[1]})
    if measured.paced != (None, None):
        base = replace(base, pacing={side: p and p.short() for side, p in zip(("original", "new"), measured.paced)})
    ratio = ratio_interval(measured.new, measured.original, level)
    if ratio is None or ratio.numerator is None:  # a launch median not positive, or a quotient past a float's range
        return replace(base, new_median=statistics.median(measured.new.pooled), verdict="inconclusive",
                       inconclusive_because="no interval",
                       reason="a launch's median is 0, or the ratio is past a float's range: no interval to judge")
    base = replace(base, original_median=ratio.denominator.centre, new_median=ratio.numerator.centre,
                   between_launches={"original": between_launches(ratio.denominator), "new": between_launches(ratio.numerator)})
    tolerance = tolerances[base.metric]
    verdict = verdict_of(ratio, tolerance, base.metric)
    because = reason = floor = None
    busy = shared_machine.verdict_reason(measured.shares)
    beyond = verdict in ("slower", "faster") and busy and _beyond_the_machine(ratio, verdict, measured.shares)
    if beyond:
        reason = f"{verdict} beyond its interval, and beyond a busy machine: {beyond}"
    elif verdict in ("slower", "faster") and busy:
        verdict, because, reason = "inconclusive", "busy machine", f"a busy machine: {verdict} beyond its interval, but {busy}"
    elif verdict == "inconclusive":
        because, reason, floor = why_inconclusive(ratio, tolerance, measured.original, measured.new, measured.shares,
                                                  measured.paced)
    pace = pace_words(measured.paces) if any(p is not None and p.verdict == HOST_PACED for p in measured.paced) else None
    if pace:
        reason = f"{reason}; {pace}" if reason else pace
    return replace(
        base, ratio=ratio.median, ci_low=ratio.low, ci_high=ratio.high, tolerance=tolerance,
        level=level, verdict=verdict, reason=reason, inconclusive_because=because, noise_floor=floor,
    )


def _beyond_the_machine(ratio: Ratio, verdict: str, shares: tuple) -> "str | None":
    """Why a busy machine cannot explain a ratio wholly outside the band (shared_machine.beyond_reason),
    or None: the interval's end nearest 1 is the least the two sides differ."""
    near = ratio.low if ratio.low > 1 else ratio.high
    return shared_machine.beyond_reason(shares, "new" if verdict == "slower" else "original",
                                        max(near, 1 / near) if near > 0 else math.inf)


def _others_share(host: "dict | None", runs: "list[Run]") -> "float | None":
    """The largest CPU share other processes took during the launches that measured `runs` (None: not recorded)."""
    if host is None:
        return None
    measured_by = {run.launch_id for run in runs}
    shares = [l.get("cpu_taken_by_others_fraction") for l in host["launches"] if l["id"] in measured_by]
    return max((share for share in shares if share is not None), default=None)


def configurations(runs: "list[dict]", key=run_key) -> "dict[tuple, list[Run]]":
    """key (run_key) -> the runs that measured it (one per repeat of its launch), in the bundle's order."""
    found: dict = {}
    for run in map(Run, runs):
        found.setdefault(key(run), []).append(run)
    return found


def compare_bundles(original: dict, new: dict, tolerances: dict, pairs: "list[tuple]", ignore: "frozenset[str]" = frozenset(),
                    left_out: "list[dict]" = ()) -> list[RunVerdict]:
    """One verdict per configuration of the original bundle, in its order; the intervals of the
    configurations both bundles measured hold together at stats.LEVEL. `ignore`: fingerprint
    fields a recorded deviation accounts for (the image after --image); `left_out`: the hosts and
    plan entries a rerun left out, each with why (its verification.left_out)."""
    found = _configurations_of(original, new, pairs, ignore, left_out)
    level = family_level(sum(isinstance(f, Measured) for f in found))
    return [judge(f, tolerances, level) if isinstance(f, Measured) else f for f in found]


def _configurations_of(original: dict, new: dict, pairs: "list[tuple]", ignore: "frozenset[str]",
                       left_out: "list[dict]") -> "list[RunVerdict | Measured]":
    hosts_left = {item["host"]: item["reason"] for item in left_out if "host" in item}
    entries_left = {item["entry"]: item["reason"] for item in left_out if "entry" in item}
    new_hosts = {h["name"]: h for h in new["hosts"]}
    original_hosts = {h["name"]: h for h in original["hosts"]}
    stopped = rerun_stopped(new)
    imported_side = imported(original, new)
    key = call_key if imported_side else run_key
    verdicts = []
    for name, new_name in pairs:
        host, new_host = original_hosts[name], new_hosts.get(new_name)
        new_runs = configurations((new_host or {}).get("runs", []), key)
        if new_host is None:
            machine_differs = [{"field": "host", "original": name, "new": None}]
        elif new_host["fingerprint"] is None:
            machine_differs = []  # the rerun failed on that host: its runs are reported failed below
        elif host["fingerprint"] is None:
            machine_differs = [{"field": "fingerprint", "original": None, "new": "present"}]
        else:
            machine_differs = differences(host["fingerprint"], new_host["fingerprint"], ignore)
        for configuration, runs in configurations(host["runs"], key).items():
            run = runs[0]
            base = RunVerdict(
                host=name, new_host=new_name, suite=run.suite, params=run.params,
                transport=with_setting(run.preset, run), world_size=run.world_size,
                metric=suites.get(run.suite).headline_metric, verdict="",
            )
            left = hosts_left.get(name) or entries_left.get((parse_launch_id(run.launch_id) or (None,))[0])
            if left:
                verdicts.append(replace(base, verdict="not comparable", reason=f"left out of the rerun: {left}"))
                continue
            new_error = None if new_host is None else new_host.get("error")
            shares = (_others_share(host, runs), _others_share(new_host, new_runs.get(configuration, [])))
            paces = (pace_ns(host, {r.launch_id for r in runs}), pace_ns(new_host, {r.launch_id for r in new_runs.get(configuration, [])}))
            verdicts.append(_compare_configuration(base, runs, new_runs.get(configuration, []), machine_differs, new_error,
                                                   shares, stopped, imported_side, paces))
    return verdicts


def plan_differences(original: dict, new: dict, left_out: "frozenset[int]" = frozenset()) -> list[str]:
    """What differs between two bundles' plans, beyond name, description and sampling (precision, launch
    repeats); [] when they are one plan. `left_out`: the original's entries a rerun left out (the new plan lacks them)."""
    ignored = ("name", "description", "precision")
    a = {k: v for k, v in original["plan"].items() if k not in ignored}
    b = {k: v for k, v in new["plan"].items() if k not in ignored}
    differ = [k for k in sorted({*a, *b}) if k != "suites" and a.get(k) != b.get(k)]
    kept = [(i, e) for i, e in enumerate(a.get("suites", [])) if i not in left_out]
    if len(kept) != len(b.get("suites", [])):
        differ.append(f"suites ({len(kept)} entries against {len(b.get('suites', []))})")
    else:
        differ += [f"suites[{i}] ({x.get('suite')})" for (i, x), y in zip(kept, b.get("suites", [])) if _measured_entry(x) != _measured_entry(y)]
    return differ


def _measured_entry(entry: dict) -> dict:
    """A plan entry without what only says how it sampled (its params' and its launches' repeats)."""
    sides = {side: measured(entry[side]) for side in ("gpu", "cpu") if side in entry}
    return {**{k: v for k, v in entry.items() if k != "launch_repeats"}, "params": measured(entry.get("params", {})), **sides}


def entry_differences(before: dict, now: dict) -> list[str]:
    """What differs between two forms of one plan entry, beyond sampling: "params.bucket_cap_mb absent -> 25"."""
    a, b = _measured_entry(before), _measured_entry(now)
    said = []
    for key in sorted({*a, *b}):
        x, y = a.get(key, "absent"), b.get(key, "absent")
        if isinstance(x, dict) and isinstance(y, dict):
            said += [f"{key}.{k} {x.get(k, 'absent')} -> {y.get(k, 'absent')}" for k in sorted({*x, *y}) if x.get(k, "absent") != y.get(k, "absent")]
        elif x != y:
            said.append(f"{key} {x} -> {y}")
    return said


def outcome(verdicts: "list[RunVerdict]") -> str:
    """passed: some run compared and every compared run reproduced; failed: a run was slower,
    faster or lost by the rerun; incomplete: none failed, but the rerun was stopped before some run;
    inconclusive: none failed but some interval was too wide to judge; not comparable: no run could
    be compared (nothing was judged, so nothing failed)."""
    compared = [v.verdict for v in verdicts if v.verdict != "not comparable"]
    if not compared:
        return "not comparable"
    if any(v in ("faster", "slower", "failed") for v in compared):
        return "failed"
    if "incomplete" in compared:
        return "incomplete"
    return "inconclusive" if "inconclusive" in compared else "passed"
