"""Verify a published bundle: rerun its plan (`verify`) or compare two bundles (`compare`), run by
run, and write the verdict (verdict.md, verdict.json) into the folder --out names: verify's beside
the new bundle it wrote there, compare's into that folder itself. Neither writes where a bundle it
only reads lies (a published folder, a read-only one)."""

from __future__ import annotations

from pathlib import Path

from bench.bundle import read_bundle
from bench.verify.compare import compare_bundles, imported, match_hosts, outcome, plan_differences, refuse_smoke, rerun_stopped
from bench.verify.signing import Signature, check_signature
from bench.verify import verdict


def _bundle_info(bundle: dict, signature: Signature) -> dict:
    return {"run_id": bundle["run_id"], "sha256": bundle["sha256"], "signature": signature.to_json()}


def judge(original: dict, original_signature: Signature, new: dict, new_signature: Signature,
          tolerances: dict, host_map: dict, out_dir: Path) -> tuple[str, str, tuple[Path, Path]]:
    """Compare, write verdict.md and verdict.json into out_dir; (outcome, markdown, paths).

    One bundle given twice (one sha256) is "same bundle": it matches itself by construction, so
    nothing is judged. Bundles of two different plans are not compared run by run: the outcome is
    "not comparable".

    Hosts pair by the two bundles' host names and host_map (--host-map) only: never by a record
    in the bundle being judged. When the new bundle records that it verifies this very original
    (same sha256), its deviations are reported and what it left out (hosts, plan entries) is
    not comparable, with why; an image deviation (--image) takes the image digest out of the
    fingerprint comparison, since the user asked for another image."""
    verification = new.get("verification") or {}
    of_this = verification.get("of_sha256") == original["sha256"]
    deviations = verification.get("deviations", []) if of_this else []
    left_out = verification.get("left_out", []) if of_this else []
    pairs, rule = match_hosts([h["name"] for h in original["hosts"]], [h["name"] for h in new["hosts"]], host_map)
    ignore = frozenset({"image_digest"}) if any(d["field"] == "image" for d in deviations) else frozenset()
    same = original["sha256"] == new["sha256"]
    plans_differ = [] if same or imported(original, new) else plan_differences(
        original, new, frozenset(item["entry"] for item in left_out if "entry" in item))
    verdicts = [] if same or plans_differ else compare_bundles(original, new, tolerances, pairs, ignore, left_out)
    result = "same bundle" if same else "not comparable" if plans_differ else outcome(verdicts)
    context = {
        "original": _bundle_info(original, original_signature), "new": _bundle_info(new, new_signature),
        "hosts_paired": rule, "host_pairs": [{"original": a, "new": b} for a, b in pairs], "deviations": deviations, "tolerances": tolerances,
        "plans_differ": plans_differ, "left_out": left_out,
        "rerun_stopped": rerun_stopped(new),
    }
    doc = verdict.document(context, verdicts, result)
    text = verdict.markdown(doc, verdicts)
    return result, text, verdict.write(out_dir, doc, text)


def compare_files(original_path: Path, new_path: Path, *, tolerances: dict, host_map: dict,
                  allowed_signers: "Path | None", require_signature: bool, out_dir: Path) -> tuple[str, str, tuple[Path, Path]]:
    """`ddpbench compare A B`: both bundles checked (sha256, schema, signatures: each one's signer
    against the allowed signers, where given), no rerun; the verdict goes into out_dir."""
    original = read_bundle(original_path)
    refuse_smoke(original, original_path)
    original_signature = check_signature(original_path, allowed_signers, require_signature)
    new = read_bundle(new_path)
    refuse_smoke(new, new_path)
    new_signature = check_signature(new_path, allowed_signers, False)
    return judge(original, original_signature, new, new_signature, tolerances, host_map, out_dir)
