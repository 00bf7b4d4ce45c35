"""Plans: named YAML files shipped in bench/plans/, or a path; validated against schema/plan.schema.json."""

from __future__ import annotations

import copy
from pathlib import Path

from bench import schemas, suites
from bench.common.selection import side_of
from bench.common.transports import env_problem
from bench.errors import PlanError, UserError
from bench.yamlfile import load_yaml

PLANS_DIR = Path(__file__).resolve().parent.parent / "plans"


def plan_names() -> list[str]:
    return sorted(p.stem for p in PLANS_DIR.glob("*.yaml"))


def plan_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        if not path.exists() and path.parent == Path(".") and (PLANS_DIR / f"{path.stem}.yaml").exists():
            raise UserError(f"{name_or_path}: no such plan file; the shipped plan of that name is --plan {path.stem} "
                            "(a name, without .yaml)")
        return path
    shipped = PLANS_DIR / f"{name_or_path}.yaml"
    if not shipped.exists():
        raise UserError(f"unknown plan {name_or_path!r}; use one of {', '.join(plan_names())} or the path of a plan file")
    return shipped


def with_defaults(plan: dict) -> dict:
    """The plan with every default from the schemas written out, so a bundle's plan is complete: each
    entry's (its suite's own where its params.schema.json's $defs/entry gives one, else the plan
    schema's), each parameter's and its precision's; where it asks for precision, each entry's
    launch_repeats raised to its least launches."""
    plan = copy.deepcopy(plan)
    entry_schema = schemas.schema("plan")["$defs"]["suite_entry"]["properties"]
    for entry in plan["suites"]:
        suite = suites.get(entry["suite"]).schema["$defs"]
        params = entry.setdefault("params", {})
        for key, spec in suite["params"]["properties"].items():
            if "default" in spec:
                params.setdefault(key, spec["default"])
        own = suite.get("entry", {}).get("properties", {})
        for key in ("launch_repeats", "transports", "world_sizes"):
            default = own.get(key, {}).get("default", entry_schema[key].get("default"))
            entry.setdefault(key, copy.deepcopy(default))
    plan.setdefault("timeout_s", schemas.schema("plan")["properties"]["timeout_s"]["default"])
    if "precision" in plan:
        precision = plan["precision"]
        for key, spec in schemas.schema("plan")["$defs"]["precision"]["properties"].items():
            precision.setdefault(key, spec["default"])
        for entry in plan["suites"]:  # every configuration in at least `launches` launches, as the bundle's plan says
            for part in [entry, *(entry[side] for side in ("gpu", "cpu") if "launch_repeats" in entry.get(side, {}))]:
                part["launch_repeats"] = max(part["launch_repeats"], precision["launches"])
    return plan


def check(plan, source: str) -> dict:
    """Validate a plan (a loaded file or one carried in a bundle) and fill its defaults. A suite this
    ddpbench does not know is named as such first, with the suites it knows; an entry's env that
    would undo its transport or blind the evidence of it is refused (bench.common.transports.env_problem)."""
    for index, entry in enumerate(plan.get("suites") or [] if isinstance(plan, dict) else []):
        if isinstance(entry, dict) and isinstance(entry.get("suite"), str):
            suites.get(entry["suite"], f"{source}: field suites[{index}].suite", "fix the plan")
    schemas.validate("plan", plan, source, "fix the plan (schema/plan.schema.json lists what is allowed)")
    plan = with_defaults(plan)
    for index, entry in enumerate(plan["suites"]):
        for cuda in (True, False):  # the entry as a host with a GPU and one without runs it
            side = side_of(entry, cuda)
            found = env_problem(entry.get("env", {}), side.transports, side.nodes)
            if found:
                raise UserError(f"{source}: field suites[{index}].env: {found}")
            try:
                suites.get(entry["suite"]).params(side.params)
            except PlanError as err:  # params the schema lets through one by one but not together
                raise UserError(f"{source}: field suites[{index}].params{'' if cuda else ' with its cpu: override'}: {err}") from None
    return plan


def smoke(plan: dict) -> dict:
    """The (checked) plan as `ddpbench run --smoke` runs it: every configuration once, in one launch, at
    the least work its suite's schema allows (SampledParams.SMOKE_LEAST), with no precision target and
    no sampling past the first batch. It shows that the plan runs, and measures nothing."""
    plan = copy.deepcopy(plan)
    plan.pop("precision", None)
    for entry in plan["suites"]:
        suite = suites.get(entry["suite"])
        minimum = {key: spec["minimum"] for key, spec in suite.schema["$defs"]["params"]["properties"].items() if "minimum" in spec}
        entry["launch_repeats"] = 1
        typed = suite.params(entry["params"])
        entry["params"].update({key: minimum[key] for key in typed.SMOKE_LEAST}, **typed.smoke_overrides())
        for name in ("gpu", "cpu"):
            override = entry.get(name)
            if override is None:
                continue
            typed = suite.params(side_of(entry, name == "gpu").params)
            least = {**{key: minimum[key] for key in typed.SMOKE_LEAST}, **typed.smoke_overrides(), "launch_repeats": 1}
            override.update({key: value for key, value in least.items() if key in override})
    return plan


def load_plan(name_or_path: str) -> dict:
    path = plan_path(name_or_path)
    return check(load_yaml(path, "plan"), str(path))


def _precision(plan: dict) -> str:
    """"; each figure sampled until its median is known to +-2% ...": what the plan's precision asks, in words."""
    p = plan.get("precision")
    if not p:
        return ""
    return (f"; each figure sampled until its median is known to +-{p['halfwidth_fraction']:.0%} (a scaling's lost interval "
            f"to {p['lost_width_fraction'] * 100:g} points), within {p['budget_fraction']:.0%} of a launch's time, every "
            f"configuration in {p['launches']} launch{'es' if p['launches'] > 1 else ''} at least")


def describe(plan: dict) -> list[str]:
    """What a (checked) plan will run, one line per suite entry with its environment: what
    `verify` shows before it runs a stranger's plan."""
    lines = [f"plan {plan['name']}: {len(plan['suites'])} suite entr{'y' if len(plan['suites']) == 1 else 'ies'}, "
             f"at most {plan['timeout_s']:g} s a launch{_precision(plan)}"]
    for index, entry in enumerate(plan["suites"]):
        env = " ".join(f"{name}={value}" for name, value in sorted(entry.get("env", {}).items())) or "none"
        worlds = ", ".join(str(w) for w in entry["world_sizes"])
        counts = [f"{entry['launch_repeats']}x"] + [f"{side} {entry[side]['launch_repeats']}x" for side in ("gpu", "cpu")
                                                    if "launch_repeats" in entry.get(side, {})]
        repeats = f", each launch run {', '.join(counts)}" if counts != ["1x"] else ""
        axes = "".join(f", {where}{name} {', '.join(map(str, part[name])) if isinstance(part[name], list) else part[name]}"
                       for where, part in (("", entry), *((f"{side} ", entry[side]) for side in ("gpu", "cpu") if side in entry))
                       for name in ("algorithms", "protocols", "nodes", "span", "gpus", "pairs") if name in part)
        lines.append(f"  suites[{index}]: {entry['suite']}, transports {', '.join(entry['transports'])}, "
                     f"world sizes {worlds}{axes}{repeats}; env: {env}")
    return lines
