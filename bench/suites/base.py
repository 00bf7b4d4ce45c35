"""What a suite is: the one class every suite's `suite.py` fills in, as nccl-tests' collectives fill
in `struct testColl`. Plain Python, no torch: the controller, the report and verify import it.

A suite's folder (bench/suites/NAME/) holds, NAME being the suite's name and written nowhere else:
- `suite.py`: a subclass of Suite, instantiated as `SUITE` (its typed Params, plan checks, cost
  model, a run's identity and label, the headline metric verify judges, plausibility warnings);
- `params.schema.json`: its parameters' JSON Schema (its `description`, what the suite measures in
  one line; `$defs/params`, what a plan entry's params, gpu and cpu may hold, with a `$ref` to the
  harness parameters its Params extends, bench/suites/harness.schema.json; optionally `$defs/entry`,
  what else its plan entries must satisfy, and `$defs/run_params`, what its runs' params hold in a
  bundle);
- `expected.json` (optional): the expected ranges of its figures (`Suite.figures`), each row with the
  key it holds for and its sources (schema/expected.schema.json; bench/judging/normal.py judges);
- `ranks.py`: what each rank runs (torch): `run(ctx, entry_params, emit)`, one record per configuration;
  optionally `imports(entry_params)`, the modules an entry uses that its ranks import only when asked,
  for the worker to import with the rest (its start-up, not the entry's set-up);
- `report.py` (optional): `section(comparison, plot, colours) -> blocks`, its part of the report;
  a suite that trains also answers the report's question there: `findings(comparison)` (a list of
  bench.report.answer.Finding) and `answer_plots(comparison, plot, colours)`, which the report's
  first section (bench/report/answer.py) shows; a suite that predicts its runs on other links
  answers `ddpbench predict` there: `predict(bundles, links, gpus, gpus_per_node, algorithm, scaling) -> blocks`
  ([] where the bundles hold none of its runs).

Nothing outside a suite's folder names it: what the rest of ddpbench asks of a run (its label, the
link it crossed, the bytes its collectives moved, its figures that expected ranges hold, the
collective call it timed) it asks the run's suite through the hooks below, each of which reads the
run through its view (bench.common.run.Run).
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from bench.common.host import Capabilities
from bench.common.run import Run
from bench.common.sampling import TYPICAL_CV, samples_needed
from bench.common.transports import link_name
from bench.suites.params import SampledParams, resolved


@dataclass
class HostResults:
    """One host's results as a suite's derived figures and warnings read them: every run of the
    host (a suite may read another suite's runs: ddp's prediction reads the all_reduce sweeps), its
    launches and its fingerprint."""

    runs: "list[Run]"
    launches: list
    fingerprint: "dict | None"
    # launch id -> the share of the machine's CPU other processes took while it ran, for the launches
    # that ran on a busy machine (bench/judging/shared_machine.py judges which)
    busy_shares: dict = field(default_factory=dict)
    _memo: dict = field(default_factory=dict, repr=False)

    def once(self, key: str, make):
        """make(), computed once per host for every run that asks (a suite's baselines, say)."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    @functools.cached_property
    def nodes_of_launch(self) -> dict:
        return {launch["id"]: launch.get("nodes", 1) for launch in self.launches}


@dataclass(frozen=True)
class Figure:
    """One figure of a run that an expected range may hold: what it is, its unit and which way is
    better, the run's value, the configuration it is keyed by and the GPUs whose links it crossed.
    bench/judging/normal.py holds it only against a range of its suite's expected.json with the same
    key, on the same GPU model and path between the GPUs (both read off the host's fingerprint)."""

    name: str  # what it is, as its suite's ranges name it: "allreduce_busbw_gbps", "h2d_copy_gbps"
    unit: str  # as a reader reads it: "GB/s", "s", "of ideal"
    higher_is_better: bool  # a bandwidth or an efficiency; a time is better lower
    value: "float | None"  # the run's median, or the figure derived across runs
    # What a range must match: the run's ranks and nodes and the NCCL setting it ran under (algorithm,
    # protocol, env: Figure.of), and what its suite adds: a message's size and dtype, a recipe's params.
    key: dict
    spread: "tuple | None" = None  # the run's own p5 and p95 of it, where it has them
    gpus: "tuple | None" = None  # the host's GPUs whose links it crossed; None: its ranks' (the first ones)

    @classmethod
    def of(cls, run: Run, name: str, unit: str, higher_is_better: bool, value: "float | None", *,
           spread: "tuple | None" = None, gpus: "tuple | None" = None, **key) -> "Figure":
        """A figure of the run keyed by `key` and by what keys every figure: its ranks, its nodes, and
        NCCL's algorithm, protocol and environment as its plan entry set them (None, None, {}: NCCL's own)."""
        transport = run.transport
        setting = {"ranks": run.world_size, "nodes": (transport.get("nodes") or {}).get("count", 1),
                   "algorithm": transport.get("algorithm"), "protocol": transport.get("protocol"), "env": run.env}
        crossed = gpus if gpus is not None else tuple(run.gpus) if run.gpus else None
        return cls(name, unit, higher_is_better, value, {**setting, **key}, spread, crossed)

    @classmethod
    def median(cls, run: Run, metric: str, name: str, unit: str, higher_is_better: bool, **key) -> "Figure":
        """The median of one of the run's metrics, with its p5 and p95."""
        found = run.metric(metric)
        summary = found["summary"] if found else {}
        return cls.of(run, name, unit, higher_is_better, summary.get("median"), spread=(summary.get("p5"), summary.get("p95")), **key)


@dataclass(frozen=True)
class Collective:
    """One collective call as nccl-tests times it: the op (all_reduce ...), the dtype (float32 ...),
    in place or not, and its size as nccl-tests' `size` counts it (all_gather's whole output)."""

    op: str
    dtype: str
    in_place: bool
    size_bytes: int


def warning(code: str, message: str, likely_cause: str) -> dict:
    """A figure of a run that no correct measurement gives (bundle schema: run.warnings)."""
    return {"code": code, "message": message, "likely_cause": likely_cause}


class Suite:
    """One benchmark suite, as everything outside its ranks knows it. Override what differs."""

    Params: ClassVar[type]  # a SampledParams subclass: the entry's params, typed
    headline_metric: ClassVar[str]  # the metric verify and compare judge a run by
    identity_params: ClassVar[tuple] = ()  # params verify's table shows for every run, varying or not
    # Params a run records of what it measured (its model's size), which no plan sets: verify's table names
    # one only where no param a plan sets tells its rows apart.
    recorded_params: ClassVar[tuple] = ()
    # Where its part stands in a report: what the links do alone (copies, collectives) before training.
    report_order: ClassVar[int] = 100
    # Measures a link between ranks (collectives): one rank measures nothing, so where world size `all`
    # means one GPU the launch is skipped (an explicit world size 1 still runs).
    needs_two_ranks: ClassVar[bool] = False
    # Its runs move their data through NCCL's collectives (a training step's, a collective call): the
    # report sets the traffic the GPU counters saw on each link beside what collective_bytes(run) says.
    moves_collective_data: ClassVar[bool] = False

    # --- where its parts are ---------------------------------------------------------------

    @property
    def package(self) -> str:
        return type(self).__module__.rpartition(".")[0]

    @property
    def name(self) -> str:
        """Its folder's name: a suite is named by its folder, and suite.py need not say it."""
        return self.package.rpartition(".")[2]

    @property
    def folder(self) -> Path:
        return Path(sys.modules[type(self).__module__].__file__).parent

    @property
    def ranks_module(self) -> str:
        """The module each rank imports: its `run(ctx, entry_params, emit)`."""
        return f"{self.package}.ranks"

    @functools.cached_property
    def schema(self) -> dict:
        """params.schema.json, its $id set to urn:ddpbench:schema:suite:NAME (plan and bundle refer to it
        so), in JSON Schema 2020-12 unless it says otherwise, as every schema of ddpbench, and the
        harness parameters its $defs/params refers to merged in (bench.suites.params.resolved)."""
        path = self.folder / "params.schema.json"
        document = json.loads(path.read_text())
        definitions = document.get("$defs", {})
        if "params" in definitions:
            definitions["params"] = resolved(definitions["params"], str(path))
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", **document, "$id": f"urn:ddpbench:schema:suite:{self.name}"}

    @property
    def description(self) -> str:
        """What the suite measures, in a line: its schema's description."""
        return self.schema.get("description", "")

    @property
    def required_params(self) -> list:
        """The parameters a plan entry must give: its schema's $defs/entry's required params."""
        return self.schema["$defs"].get("entry", {}).get("properties", {}).get("params", {}).get("required", [])

    def report_section(self):
        """The suite's report part (its module, with `section`), or None where the folder has none."""
        name = f"{self.package}.report"
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as missing:
            if missing.name == name:
                return None
            raise

    # --- before a launch -------------------------------------------------------------------

    def params(self, entry_params: dict) -> SampledParams:
        return self.Params.of(entry_params)

    def check_placement(self, params, *, nodes: int, ranks_per_node: "int | None") -> None:
        """What the hosts file decides, judged before any host is touched: the nodes a launch spans and
        the ranks per node where the plan names them (None for `all`). Raise PlanError: `ddpbench run`
        refuses the plan in one line, exit 2."""

    def check_plan(self, params, host: Capabilities, *, world_size: int, transport: str, nodes: int) -> None:
        """What only this host can judge, before anything is launched: raise PlanError."""

    def settled_together(self, entry_params: dict, host: Capabilities, world_sizes: list, nodes: int, settled: dict) -> dict:
        """What the plan's entries decide together on this host, `settled` by the entries before this one
        with this one's part added (the training family's `micro_batch: gpu-bound`: one micro-batch for
        all); by default nothing."""
        return settled

    def resolved_params(self, entry_params: dict, host: Capabilities, world_sizes: list, nodes: int, settled: dict) -> dict:
        """The entry's params with what only this host can decide filled in (the training family's
        `micro_batch: auto`), `settled` by every entry of the plan (settled_together); by default as they are."""
        return entry_params

    def configurations(self, params, world_size: int, host: Capabilities) -> int:
        """How many runs (configuration points) one launch records."""
        return 1

    def one_rank_params(self, entry_params: dict, world_sizes: list) -> dict:
        """The params of the entry's 1-rank launch, where the entry also runs these world sizes (above 1):
        what it measures beside the plan's configurations as their baselines."""
        return entry_params

    def planned_value(self, run_params: dict, key: str):
        """The value of an identity parameter (identity_params) as the plan's entry names it, for a run
        recorded with run_params (a resumed run keeps only runs its plan asks for)."""
        return run_params.get(key)

    def nccl_collectives(self, params) -> list:
        """[(what it is to a user, NCCL's function or None where NCCL chooses no algorithm for it)] of the
        collectives an entry's runs are about: what a plan entry's algorithms and protocols apply to
        (bench/common/algorithms.py); [] for a suite that runs none (the axis is refused)."""
        return []

    def nccl_calls(self, run: Run) -> list:
        """[(NCCL's function, the bytes one call moves as NCCL's TUNING lines count them, or None for
        any size)] of the collectives a run measured: which of its launch's TUNING lines are its own."""
        return []

    def launch_seconds(self, params, preset: str, world_size: int, host: Capabilities) -> float:
        """The cost model: seconds one launch takes past its start-up (bench/common/cost.py)."""
        return 0.0

    def measured_seconds(self, params, preset: str, world_size: int, host: Capabilities) -> float:
        """Of launch_seconds, its timed calls or steps: what the launch measures."""
        return 0.0

    def host_paced(self, params, preset: str, world_size: int, host: Capabilities) -> bool:
        """Whether the cost model expects the host's CPU, not its GPUs, to pace the launch's steps: its time
        then follows how fast that CPU launches kernels."""
        return False

    def expected_samples(self, params, preset: str, world_size: int, host: Capabilities, halfwidth: float) -> int:
        """The samples the cost model expects a run to take toward a median to +-halfwidth: what it prices
        sampling until the figure is clear by (bench/common/sampling.py); by default, a typical spread's."""
        return samples_needed(halfwidth, TYPICAL_CV[host.kind])

    # --- a run, once measured ----------------------------------------------------------------

    def configuration(self, run: Run) -> tuple:
        """What a run measured, whoever ran it, by its parameters and world size; with the setting it ran
        under (bench.common.transports.setting_key), the key two bundles must share to be compared."""
        return (self.name, json.dumps(run.params, sort_keys=True), run.world_size)

    def label(self, run: Run) -> str:
        """What a run measured, in a few words (progress lines, tables)."""
        return f"{self.name}, {run.world_size} ranks"

    def progress_label(self, record: dict, backend: str) -> str:
        """label() of a run while its launch still runs: the record its ranks wrote, which has no transport
        yet, read with the launch's backend (gloo's ranks compute on the CPU: "2 processes")."""
        return self.label(Run(record, backend=backend))

    def link_name(self, run: Run) -> str:
        """The link a run's bytes crossed, for the report's series (bench.common.transports.link_name)."""
        return link_name(run)

    def peer_copies(self, run: Run) -> bool:
        """Whether the run moved bytes between GPUs by CUDA peer copies, past NCCL: P2P as the driver
        has it, whatever NCCL's environment says (the P2P gate's marks read it, bench/judging/machine.py)."""
        return False

    def collective_bytes(self, run: Run) -> "float | None":
        """The bytes one step (one timed call) of the run moved through collectives per GPU each way, as
        bus bandwidth counts them (a ring all-reduce 2(n-1)/n of its size); None where the run does not
        say, or the suite moves nothing through collectives (moves_collective_data)."""
        return None

    def timed_collective(self, run: Run) -> "tuple[str, str, int, float] | None":
        """(op, dtype, bytes, median seconds) of the one collective call a run timed: the sweeps the
        training suites price a step's communication with (bench/suites/training/derived.py); None where
        the run timed no single collective, or has no time."""
        return None

    def collective_call(self, run: Run) -> "Collective | None":
        """The collective the run timed as nccl-tests times one (`ddpbench export --format nccl-tests`);
        None where it timed none nccl-tests has a program for."""
        return None

    def collective_run_params(self, call: Collective) -> "dict | None":
        """A run's params for one of nccl-tests' results (`ddpbench import`); None where the suite does
        not time that collective."""
        return None

    def bus_factor(self, op: str, world_size: int) -> "float | None":
        """busbw / algbw of a collective of this suite at this world size, as nccl-tests counts it; None
        for an op it does not time."""
        return None

    def figures(self, run: Run) -> list:
        """The run's figures that expected ranges may hold (Figure each; bench/judging/normal.py holds
        them against the rows of the suite's expected.json); [] where it has none."""
        return []

    def baselines(self, runs: "list[Run]") -> dict:
        """id(run) -> the run it is scaled against (ddp: its 1-GPU run), for the runs that have one."""
        return {}

    def pacing(self, runs: "list[Run]") -> "Pacing | None":
        """What paced the runs of one configuration (bench/suites/training/pacing.py), where the suite's
        figure can be paced by the host rather than by what it measures; None where it cannot."""
        return None

    def derive(self, results: HostResults) -> None:
        """Set figures derived from several runs on this suite's runs, on their records (run.record["derived"],
        run.record["notes"])."""

    def warnings(self, run: Run, results: HostResults) -> list:
        """The implausible figures of one ok run of this suite (bench.suites.base.warning each)."""
        return []
