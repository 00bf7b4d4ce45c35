"""A verdict as an in-toto Statement v1 with the Test Result predicate v0.1 (`compare` and `verify`
--in-toto FILE): its subject the new bundle's file (by sha256), its configuration the original
bundle's file and the verdict.json that holds every run's verdict, its result PASSED (the outcome
passed), FAILED (failed) or WARNED (inconclusive, or nothing comparable), and each run's name listed
with its verdict. `ddpbench sign` signs one, `ddpbench validate` checks one and its signature
(schema/in-toto.schema.json)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bench import schemas
from bench.errors import UserError
from bench.formats.junit import FAILING, SKIPPED, case_name, shown_params
from bench.inputfile import read_input, read_json_text

STATEMENT = "https://in-toto.io/Statement/v1"
TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"
RESULTS = {"passed": "PASSED", "same bundle": "PASSED", "failed": "FAILED", "inconclusive": "WARNED", "not comparable": "WARNED"}
MAX_STATEMENT_BYTES = 16 * 1024 * 1024
SUFFIX = ".intoto.json"


def _file(path: Path, what: str, **annotations) -> dict:
    """A ResourceDescriptor of a file: its name and the sha256 of its bytes."""
    digest = hashlib.sha256(read_input(path, what, 1 << 30)).hexdigest()
    return {"name": path.name, "digest": {"sha256": digest}, **({"annotations": annotations} if annotations else {})}


def statement(verdict: dict, verdict_path: Path, original: Path, new: Path) -> dict:
    runs = verdict["runs"]
    varying = shown_params(runs)
    named = lambda kinds: [f"{run['host']}.{run['suite']}: {case_name(run, varying[run['suite']])}"  # noqa: E731
                           for run in runs if run["verdict"] in kinds]
    return {
        "_type": STATEMENT,
        "subject": [_file(new, "bundle", run_id=verdict["new"]["run_id"], signature=verdict["new"]["signature"]["state"])],
        "predicateType": TEST_RESULT,
        "predicate": {
            "result": RESULTS[verdict["outcome"]],
            "configuration": [
                _file(original, "bundle", role="original", run_id=verdict["original"]["run_id"],
                      signature=verdict["original"]["signature"]["state"]),
                _file(verdict_path, "verdict", role="verdict", outcome=verdict["outcome"], tolerances=verdict["tolerances"],
                      summary=verdict["summary"]),
            ],
            "passedTests": named(("reproduced",)),
            "warnedTests": named(SKIPPED),
            "failedTests": named((*FAILING, "failed")),
        },
    }


def text(document: dict) -> str:
    return json.dumps(document, indent=1, ensure_ascii=True) + "\n"


def is_statement(path: Path) -> bool:
    """A Statement's file is named NAME.intoto.json (`--in-toto`'s suggestion), a bundle's not."""
    return path.name.endswith(SUFFIX)


def read(path: Path) -> dict:
    """An in-toto Statement, checked against schema/in-toto.schema.json; one line where it departs."""
    document = read_json_text(path, "in-toto Statement", MAX_STATEMENT_BYTES)
    problem = schemas.first_problem(document, "in-toto")
    if problem:
        raise UserError(f"{path}: {problem}; this is not an in-toto Statement v1 (schema/in-toto.schema.json)")
    return document
