"""`ddpbench verify`: rerun a bundle's plan on the user's hosts and judge the new bundle against it.

Everything that can be refused is checked before anything runs (the bundle's sha256 and schema,
its signature, the plan, the hosts file, the host pairs, the tolerances), then what of the bundle
these hosts can compare (scope.py): only that part reruns, and where none can, nothing runs. The
rerun takes the plan as the original ran it, its sample counts included, priced by the cost model
on these hosts beside what the bundle records (its author's figures bound nothing); one priced past
--max-hours waits for a yes. Nothing from the bundle names a file to write: the new bundle goes to
OUT/<new run id>/, as `ddpbench run` writes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.bundle import read_bundle
from bench.common.escape import terminal
from bench.common.host import Capabilities
from bench.controller import plans
from bench.controller.hosts import load_hosts
from bench.controller.inventory import Inventory
from bench.controller.pricing import hold, price
from bench.bundle.assembly import tool_info
from bench.controller.run import execute
from bench.verify import judge
from bench.errors import UserError
from bench.verify.compare import match_hosts, refuse_imported, refuse_smoke
from bench.verify.machines import image_ref
from bench.verify.scope import Scope, comparable_part, recorded, unused_hosts
from bench.verify.signing import Signature, check_key, check_signature, sign
from bench.verify.verdict import left_out_name


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


@dataclass(frozen=True)
class Verified:
    """What `verify` ended with: the outcome and its text, and, where anything reran, the new
    bundle and the verdict's files (none where nothing could be compared: NOT COMPARABLE at once)."""

    outcome: str
    text: str
    bundle_path: "Path | None" = None
    bundle: "dict | None" = None
    verdict_paths: "tuple[Path, Path] | None" = None


def nothing_comparable(original: dict, scope: Scope) -> str:
    lines = [f"NOT COMPARABLE: nothing of bundle {original['run_id']} can be rerun on these hosts, so nothing ran:"]
    lines += [f"- {left_out_name(item)}: {item['reason']}" for item in scope.left_out]
    if not scope.left_out:
        lines.append("- the hosts file pairs no host with the bundle's")
    return "\n".join(lines)


def known_machines(original: dict, scope: Scope) -> "dict[str, Capabilities]":
    """{new host: its machine as the bundle's fingerprint of its original describes it}: what a rerun is
    priced on where the probe cannot read the host (a batch scheduler's nodes)."""
    fingerprints = {h["name"]: h["fingerprint"] for h in original["hosts"]}
    return {new: Capabilities.of(fingerprints[old]) for old, new in scope.pairs if fingerprints.get(old)}


def verify(bundle_path: Path, hosts_path: Path, out_root: Path, *, image: "str | None", tolerances: dict,
           host_map: dict, allowed_signers: "Path | None", require_signature: bool, max_hours: float,
           key: "Path | None" = None, assume_yes: bool = False, ask: "Callable[[str], bool] | None" = None,
           announce: "Callable[[str], None]" = lambda line: print(terminal(line))) -> Verified:
    """Rerun the part of the bundle these hosts can compare, and judge it. `announce` gets what
    is left out, what the plan will run (its environment included) and the estimate before
    anything runs: the rerun priced by the cost model on these hosts (controller.pricing), beside what the
    bundle records it took; one priced past max_hours needs assume_yes or `ask` to say yes. With `key`,
    the new bundle is signed and its signature judged by the rule the original's is (allowed_signers)."""
    original = read_bundle(bundle_path)
    refuse_smoke(original, bundle_path)
    refuse_imported(original, bundle_path)
    signature = check_signature(bundle_path, allowed_signers, require_signature)
    if key is not None:
        check_key(key, allowed_signers)
    plan = plans.check(original["plan"], f"{bundle_path}: plan")
    inventory = load_hosts(hosts_path)
    pairs, rule = match_hosts([h["name"] for h in original["hosts"]], [h.name for h in inventory.hosts], host_map)
    scope = comparable_part(original, plan, inventory, pairs, rule)
    if scope.nothing:
        return Verified("not comparable", nothing_comparable(original, scope))
    for item in scope.left_out:
        announce(f"left out: {left_out_name(item)}: {item['reason']}")
    for name in unused_hosts(inventory, scope):
        announce(f"not used: host {name} of the hosts file reruns no host of the bundle")
    rerun_inventory, verification = plan_rerun(original, signature, scope.inventory, pairs, rule, image)
    cost = price(rerun_inventory, scope.plan, scope.probes, known=known_machines(original, scope))
    verification.update(left_out=scope.left_out, estimated_s=round(cost.seconds, 1))
    for line in plans.describe(scope.plan):
        announce(line)
    announce(f"verify: {cost.text}; {recorded(original, scope).text}")
    for line in cost.not_priced():
        announce(f"verify: {line}")
    hold("verify", cost, max_hours, assume_yes, ask)
    path, new = execute(rerun_inventory, scope.plan, out_root, verification=verification)
    if key is not None:
        sign(path, key)
    new_signature = check_signature(path, allowed_signers, False) if key is not None else Signature("unsigned")
    result, text, verdict_paths = judge(original, signature, new, new_signature, tolerances, host_map, path.parent)
    return Verified(result, text, path, new, verdict_paths)
