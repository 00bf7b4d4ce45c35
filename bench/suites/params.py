"""The harness's parameters: typed here, which every suite's Params extends, and their schema beside
(harness.schema.json: bounds, defaults and descriptions, one $defs entry per class, which a suite's
params.schema.json refers to). Plain Python: the controller types and checks plans with them, and the
ranks (bench/agent/harness.py) sample by them."""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path
from typing import ClassVar, TypeVar

from bench.errors import PlanError, UserError

HARNESS_SCHEMA = Path(__file__).resolve().parent / "harness.schema.json"
HARNESS_ID = "urn:ddpbench:schema:harness"


P = TypeVar("P", bound="SampledParams")


@dataclass(frozen=True)
class SampledParams:
    """A suite's parameters, typed, built once from its plan entry as the schema defaulted it
    (bench/controller/plans.py writes every default out; none is repeated here). A field with
    a default here is one the schema leaves optional: None stands for absent.

    Every suite samples the same way (bench/agent/harness.py sample_until_steady): past the first
    batch, more batches of the same size while the median's interval is wider than the plan's
    precision target or the samples' CV is above cv_target (None: never), for at most sampling_cap_s
    past the first batch."""

    # Fields the agent sets on a launch's params, which no plan writes and no schema holds.
    AGENT_SET: ClassVar[tuple] = ()
    # Fields a smoke run (`ddpbench run --smoke`) sets to their schema's minimum: the least work a run takes.
    SMOKE_LEAST: ClassVar[tuple] = ()

    cv_target: "float | None"
    sampling_cap_s: float

    @property
    def minimum_samples(self) -> int:
        """The samples a run takes at least (its repetitions or steps)."""
        raise NotImplementedError

    def with_minimum_samples(self: P, count: int) -> P:
        """The same parameters taking `count` samples at least: what the cost model prices a sample by."""
        raise NotImplementedError

    def smoke_overrides(self) -> dict:
        """What a smoke run sets beside SMOKE_LEAST: its first batch of samples is its last."""
        return {"cv_target": None}

    @classmethod
    def of(cls: "type[P]", entry: dict) -> P:
        missing = [f.name for f in fields(cls) if f.default is MISSING and f.name not in entry]
        if missing:
            raise PlanError(f"a suite entry's params lack {', '.join(missing)}: the agent takes the plan as "
                            "`ddpbench run` resolves it, with the schema's defaults written out")
        return cls(**{f.name: entry[f.name] for f in fields(cls) if f.name in entry})


@dataclass(frozen=True)
class RepeatedParams(SampledParams):
    """Parameters of a suite that times a call repeated: nccl-tests' warm-up (-w), calls per
    repetition (-n) and repetitions (-N)."""

    warmup_iters: int
    iters: int
    repetitions: int
    SMOKE_LEAST: ClassVar[tuple] = ("warmup_iters", "iters", "repetitions")

    @property
    def minimum_samples(self) -> int:
        return self.repetitions

    def with_minimum_samples(self, count: int) -> "RepeatedParams":
        return replace(self, repetitions=count)


@dataclass(frozen=True)
class SweptParams(RepeatedParams):
    """A repeated call over message sizes, as nccl-tests' -b/-e/-f sweep them."""

    begin_bytes: int
    end_bytes: int
    factor: int

    def sizes(self) -> list[int]:
        """begin, begin x factor, ... up to end."""
        sizes, size = [], self.begin_bytes
        while size <= self.end_bytes:
            sizes.append(size)
            size *= self.factor
        return sizes

    def check_sweep(self, suite: str) -> None:
        if self.begin_bytes > self.end_bytes:
            raise PlanError(f"{suite}: begin_bytes {self.begin_bytes} is larger than end_bytes {self.end_bytes}; sizes must increase")


# --- their schema --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def harness_schema() -> dict:
    return json.loads(HARNESS_SCHEMA.read_text())


def merged(shared, own):
    """own over shared: objects merged key by key (a property of own's over the shared one of its name),
    own's keys first, `required` lists joined, anything else own's."""
    if not (isinstance(shared, dict) and isinstance(own, dict)):
        return copy.deepcopy(own)
    result = {}
    for key, value in own.items():
        if key not in shared:
            result[key] = copy.deepcopy(value)
        elif key == "required" and isinstance(shared[key], list):
            result[key] = shared[key] + [name for name in value if name not in shared[key]]
        else:
            result[key] = merged(shared[key], value)
    return {**result, **{key: copy.deepcopy(value) for key, value in shared.items() if key not in own}}


def resolved(params: dict, source: str) -> dict:
    """A `$defs/params` with the harness parameters its `$ref` names merged in, its own keys winning:
    what the plan validates and whose defaults the controller writes out, read with json alone (the
    benchmarks' scripts do so on a bare GPU host). `source` names the schema for an error."""
    ref = params.get("$ref")
    if ref is None:
        return params
    definitions = harness_schema()["$defs"]
    known = {f"{HARNESS_ID}#/$defs/{name}": definition for name, definition in definitions.items()}
    if ref not in known:
        raise UserError(f"{source}: $defs/params refers to {ref!r}, which is no harness class; refer to one of "
                        f"{', '.join(known)}, or to none")
    return merged(resolved(known[ref], str(HARNESS_SCHEMA)), {key: value for key, value in params.items() if key != "$ref"})
