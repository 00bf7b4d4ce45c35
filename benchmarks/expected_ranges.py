"""This project's own expected ranges ("is my number normal?") from its bundles in benchmarks/results/bundles/.

    python benchmarks/expected_ranges.py            # print the block of bench/common/reference.py they make
    python benchmarks/expected_ranges.py --write    # and write it there, between its two marker lines

Every GPU bundle there (.json or .json.gz) becomes a source (its run id, date and machine) and its runs'
figures ranges (bench/judging/normal.py measured_ranges): per GPU model, figure (busbw of each collective,
DDP and FSDP step time and scaling efficiency), path, ranks, message size class and training recipe, from the
lowest median to the highest, each widened by 5% either way or to its run's p5-p95 where wider. To add a box
(4x H200, say), copy its bundle into benchmarks/results/bundles/ and run this with --write; tests/common/
test_reference.py fails while the block and the bundles disagree. Standard library and bench only; no GPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.links import link_summary  # noqa: E402
from bench.judging.normal import RECIPE_KEYS, measured_ranges  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUNDLES = REPO / "benchmarks" / "results" / "bundles"
REFERENCE = REPO / "bench" / "common" / "reference.py"
WIDTH = 124
BEGIN = "# --- This project's own ranges, written by benchmarks/expected_ranges.py from benchmarks/results/bundles/ ---"
END = "# --- end of the block benchmarks/expected_ranges.py writes ---"


def read(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def gpu_bundles() -> list[tuple[str, Path, dict]]:
    """(source name, path, bundle) of every bundle whose first host has GPUs, by run id."""
    found = []
    for path in sorted(BUNDLES.glob("*.bundle.json*")):
        bundle = read(path)
        fp = bundle["hosts"][0].get("fingerprint") or {}
        gpus = fp.get("gpus") or []
        if not gpus:
            continue
        model = re.search(r"\b([A-Z]+\d+)\b", gpus[0]["name"])
        found.append((f"ddpbench-{(model[1] if model else 'gpu').lower()}x{len(gpus)}-{bundle['run_id'][-6:]}", path, bundle))
    return sorted(found, key=lambda item: item[2]["run_id"])


def recipe_name(config: tuple) -> str:
    """'gpt2-large ddp mb2 x4 bf16': the recipe's model, strategy, micro-batch, accumulation, precision, and
    what departs from eager fp32-weight AdamW training."""
    values = dict(config)
    parts = [values["model"], values.get("sharding", "ddp"), f"mb{values['micro_batch']}", f"x{values['grad_accum']}",
             values["precision"]]
    parts += [word for key, word in (("compile", "compiled"), ("cuda_graphs", "graphed"), ("activation_checkpointing", "checkpointed"))
              if values.get(key)]
    parts += [values[key] for key in ("optimizer",) if values.get(key, "adamw") != "adamw"]
    parts += ["bf16 weights"] if values.get("weights_dtype", "float32") != "float32" else []
    return " ".join(str(part) for part in parts)


def wrapped(text: str, indent: str) -> list[str]:
    """text broken after its commas into lines of at most WIDTH characters, the later ones indented."""
    lines, line = [], ""
    for part in text.split(", "):
        candidate = f"{line}, {part}" if line else part
        if line and len(indent) + len(candidate) > WIDTH:
            lines.append(line + ",")
            line = part
        else:
            line = candidate
    return [(indent if i else "") + each for i, each in enumerate(lines + [line])]


def block() -> str:
    bundles = gpu_bundles()
    rows = measured_ranges([(name, bundle) for name, _, bundle in bundles])
    recipes: dict = {}
    for row in rows:
        config = row["match"].get("config")
        if config is not None and config not in recipes.values():
            name = recipe_name(config)
            while name in recipes:
                name += "'"
            recipes[name] = config
    named = {config: name for name, config in recipes.items()}
    lines = [BEGIN, "# Each bundle: (run id, date, machine, plan, file).", "MEASURED_BUNDLES = {"]
    for name, path, bundle in bundles:
        machine = link_summary(bundle["hosts"][0]["fingerprint"])["link_label"]
        lines += wrapped(f"    {name!r}: ({bundle['run_id']!r}, {bundle['started_at'][:10]!r}, {machine!r}, {bundle['plan']['name']!r}, "
                         f"{str(path.relative_to(REPO))!r}),", "        ")
    lines += ["}", *wrapped(f"# A training row's recipe: a run's params must hold every one of these: {', '.join(RECIPE_KEYS)}.", "# "),
              "MEASURED_RECIPES = {"]
    for name, config in recipes.items():
        first, *rest = wrapped(f"    {name!r}: {dict(config)!r},", "        ")
        lines += [first, *rest]
    lines += ["}", "# gpu, link, figure, low, high, runs, sources, what a run must match (a recipe by its name).", "MEASURED_RANGES = ("]
    for row in rows:
        match = {key: named[value] if key == "config" else value for key, value in row["match"].items()}
        match = {("recipe" if key == "config" else key): value for key, value in match.items()}
        lines += wrapped(f"    ({row['gpu']!r}, {row['link']!r}, {row['figure']!r}, {row['low']!r}, {row['high']!r}, {row['runs']}, "
                         f"{tuple(row['sources'])!r}, {match!r}),", "     ")
    return "\n".join(lines + [")", END])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the block into bench/common/reference.py")
    args = parser.parse_args()
    text = block()
    if not args.write:
        print(text)
        return 0
    reference = REFERENCE.read_text()
    if BEGIN not in reference or END not in reference:
        print(f"error: {REFERENCE} has no block between its marker lines; restore them from git", file=sys.stderr)
        return 2
    head, rest = reference.split(BEGIN, 1)
    REFERENCE.write_text(head + text + rest.split(END, 1)[1])
    print(f"wrote {text.count(chr(10) + '    (')} range(s) into {REFERENCE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
