"""`ddpbench verify`: rerun a bundle's plan on the user's hosts and judge the new bundle against it.

Everything that can be refused is checked before anything runs (the bundle's sha256 and schema,
its signature, the plan, the hosts file, the host pairs, the tolerances). Nothing from the bundle
names a file to write: the new bundle goes to OUT/<new run id>/, as `ddpbench run` writes it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from bench import suites
from bench.bundle import read_bundle
from bench.common.stats import cv
from bench.controller import plans
from bench.controller.hosts import load_hosts
from bench.controller.inventory import Inventory
from bench.bundle.assembly import tool_info
from bench.controller.run import execute
from bench.verify import judge
from bench.verify.compare import match_hosts
from bench.verify.machines import image_ref
from bench.verify.signing import Signature, check_signature


def _tool_label(tool: dict) -> str:
    return f"{tool['version']} ({(tool.get('git_commit') or 'unknown commit')[:12]})"


def plan_rerun(original: dict, signature: Signature, inventory: Inventory, pairs: list, rule: str,
               image: "str | None") -> tuple[Inventory, dict]:
    """The hosts to run on, with the image each docker host gets, and the new bundle's
    `verification` record: what it verifies, how hosts pair, and every deviation from the original."""
    hosts_by_name = {h["name"]: h for h in original["hosts"]}
    original_of = {new: hosts_by_name[old] for old, new in pairs if new is not None}
    deviations, images, hosts = [], [], []
    if len(original["hosts"]) != len(inventory.hosts):
        deviations.append({"field": "host_count", "original": len(original["hosts"]), "used": len(inventory.hosts), "note": "the hosts file"})
    for host in inventory.hosts:
        before = original_of.get(host.name)
        pinned = image_ref(before["fingerprint"]) if before else None
        used = image or pinned
        if image and image != pinned:
            deviations.append({"field": "image", "host": host.name, "original": pinned, "used": image, "note": "--image"})
        if before and before["runtime"] != host.runtime:
            deviations.append({"field": "runtime", "host": host.name, "original": before["runtime"], "used": host.runtime, "note": "the hosts file"})
        images.append({"host": host.name, "image": used})
        hosts.append(dataclasses.replace(host, image=used) if host.runtime == "docker" and used else host)
    now = tool_info()
    if (original["tool"]["version"], original["tool"].get("git_commit")) != (now["version"], now["git_commit"]):
        deviations.append({"field": "tool", "original": _tool_label(original["tool"]), "used": _tool_label(now), "note": "this ddpbench checkout"})
    verification = {
        "of_run_id": original["run_id"], "of_sha256": original["sha256"], "of_signature": signature.to_json(),
        "hosts_paired": rule, "host_pairs": [{"original": old, "new": new} for old, new in pairs],
        "image_requested": image, "images": images, "deviations": deviations,
    }
    return dataclasses.replace(inventory, hosts=tuple(hosts)), verification


def as_tight_as_the_original(original: dict, plan: dict) -> "tuple[dict, list[dict]]":
    """The plan to rerun: each entry without a cv_target of its own samples until its CV is down to
    the original's (the median over the entry's runs), within sampling_cap_s: a rerun noisier than
    the original takes more samples, so its interval can be as narrow. The deviations it records."""
    cvs: dict = {}
    for host in original["hosts"]:
        for run in host["runs"]:
            samples = (run["metrics"].get(suites.get(run["suite"]).headline_metric) or {}).get("samples") or []
            if run["status"] == "ok" and len(samples) > 1:
                cvs.setdefault(int(run["launch_id"].split("-")[0]), []).append(cv(samples))
    plan = {**plan, "suites": [dict(e, params=dict(e["params"])) for e in plan["suites"]]}
    deviations = []
    for index, entry in enumerate(plan["suites"]):
        if entry["params"].get("cv_target") is None and cvs.get(index):
            target = round(max(sorted(cvs[index])[len(cvs[index]) // 2], 0.001), 4)
            entry["params"]["cv_target"] = target
            deviations.append({"field": "cv_target", "original": None, "used": f"suites[{index}]: {target:g}",
                               "note": "sample until as steady as the original"})
    return plan, deviations


def verify(bundle_path: Path, hosts_path: Path, out_root: Path, *, image: "str | None", tolerances: dict,
           host_map: dict, allowed_signers: "Path | None", require_signature: bool,
           announce: Callable[[str], None] = print) -> tuple[str, str, Path, dict, tuple[Path, Path]]:
    """(outcome, verdict markdown, new bundle path, new bundle, verdict paths). `announce` gets
    what the bundle's plan will run (its environment included) before anything runs."""
    original = read_bundle(bundle_path)
    signature = check_signature(bundle_path, allowed_signers, require_signature)
    plan = plans.check(original["plan"], f"{bundle_path}: plan")
    inventory = load_hosts(hosts_path)
    pairs, rule = match_hosts([h["name"] for h in original["hosts"]], [h.name for h in inventory.hosts], host_map)
    inventory, verification = plan_rerun(original, signature, inventory, pairs, rule, image)
    plan, sampling = as_tight_as_the_original(original, plan)
    verification["deviations"] += sampling
    for line in plans.describe(plan):
        announce(line)
    path, new = execute(inventory, plan, out_root, verification=verification)
    result, text, verdict_paths = judge(original, signature, new, Signature("unsigned"), tolerances, host_map, path.parent)
    return result, text, path, new, verdict_paths
