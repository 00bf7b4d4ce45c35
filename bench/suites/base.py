"""What a suite is: the one class every suite's `suite.py` fills in, as nccl-tests' collectives fill
in `struct testColl`. Plain Python, no torch: the controller, the report and verify import it.

A suite's folder (bench/suites/NAME/) holds:
- `suite.py`: a subclass of Suite, instantiated as `SUITE` (its typed Params, plan checks, cost
  model, a run's identity and label, the headline metric verify judges, plausibility warnings);
- `params.schema.json`: its parameters' JSON Schema (`$defs/params`, what a plan entry's params,
  gpu and cpu may hold; optionally `$defs/entry`, what else its plan entries must satisfy, and
  `$defs/run_params`, what its runs' params hold in a bundle);
- `ranks.py`: what each rank runs (torch): `run(ctx, entry_params, emit)`, one record per configuration;
- `report.py` (optional): `section(comparison, plot, colours) -> blocks`, its part of the report;
  a suite that trains also answers the report's question there: `findings(comparison)` (a list of
  bench.report.answer.Finding) and `answer_plots(comparison, plot, colours)`, which the report's
  first section (bench/report/answer.py) shows; a suite that predicts its runs on other links
  answers `ddpbench predict` there: `predict(bundles, links, gpus, gpus_per_node, algorithm) -> blocks`
  ([] where the bundles hold none of its runs).

Nothing outside a suite's folder names it: what the rest of ddpbench asks of a run (its label, the
link it crossed, the GPUs it crossed, the bytes its collectives moved, the figure the expected ranges
judge, the collective call it timed) it asks the run's suite through the hooks below, each of which
reads the run through its view (bench.common.run.Run).
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
from bench.common.transports import link_name
from bench.suites.params import SampledParams


@dataclass
class HostResults:
    """One host's results as a suite's derived figures and warnings read them: every run of the
    host (a suite may read another suite's runs: ddp's prediction reads the all_reduce sweeps), its
    launches and its fingerprint."""

    runs: "list[Run]"
    launches: list
    fingerprint: "dict | None"
    _memo: dict = field(default_factory=dict, repr=False)

    def once(self, key: str, make):
        """make(), computed once per host for every run that asks (a suite's baselines, say)."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    @functools.cached_property
    def others_share(self) -> dict:
        """launch id -> the share of the machine's CPU other processes took while it ran (None: not recorded)."""
        return {launch["id"]: launch.get("cpu_taken_by_others_fraction") for launch in self.launches}

    @functools.cached_property
    def nodes_of_launch(self) -> dict:
        return {launch["id"]: launch.get("nodes", 1) for launch in self.launches}


def warning(code: str, message: str, likely_cause: str) -> dict:
    """A figure of a run that no correct measurement gives (bundle schema: run.warnings)."""
    return {"code": code, "message": message, "likely_cause": likely_cause}


class Suite:
    """One benchmark suite, as everything outside its ranks knows it. Override what differs."""

    name: ClassVar[str]
    Params: ClassVar[type]  # a SampledParams subclass: the entry's params, typed
    headline_metric: ClassVar[str]  # the metric verify and compare judge a run by
    identity_params: ClassVar[tuple] = ()  # params verify's table shows for every run, varying or not
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
    def folder(self) -> Path:
        return Path(sys.modules[type(self).__module__].__file__).parent

    @property
    def ranks_module(self) -> str:
        """The module each rank imports: its `run(ctx, entry_params, emit)`."""
        return f"{self.package}.ranks"

    @functools.cached_property
    def schema(self) -> dict:
        """params.schema.json, its $id set to urn:ddpbench:schema:suite:NAME (plan and bundle refer to it
        so), in JSON Schema 2020-12 unless it says otherwise, as every schema of ddpbench."""
        document = json.loads((self.folder / "params.schema.json").read_text())
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", **document, "$id": f"urn:ddpbench:schema:suite:{self.name}"}

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
        has it, whatever NCCL's environment says (the P2P gate's marks read it, bench/suites/judging/machine.py)."""
        return False

    def gpus_crossed(self, run: Run, gpu_count: int) -> list:
        """The indices of the host's GPUs (it has gpu_count) whose links the run's figure crossed: its
        ranks' GPUs, those the plan entry named or else the first; a suite whose figure names its ends
        says so itself."""
        if run.gpus:  # the GPUs the plan entry named
            return list(run.gpus)
        return list(range(min(run.world_size, gpu_count)))

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

    def judged_figure(self, run: Run) -> "tuple[str, float | None, int | None] | None":
        """(kind of figure, the run's median, the bytes a call moved or None) of the run's figure that the
        expected ranges judge (bench/common/reference.py EXPECTED, bench/suites/judging/normal.py); None: the
        suite has no such figure."""
        return None

    def judged_figures(self, run: Run) -> list:
        """Every figure of the run the expected ranges judge: judged_figure's, and where the run scales
        against a 1-GPU run (its derived scaling_efficiency_fraction), that scaling."""
        found = [figure for figure in [self.judged_figure(run)] if figure is not None]
        scaling = run.derived.get("scaling_efficiency_fraction")
        if found and run.world_size > 1 and scaling is not None:
            found.append((f"{self.name}_scaling_efficiency_fraction", scaling, None))
        return found

    def baselines(self, runs: "list[Run]") -> dict:
        """id(run) -> the run it is scaled against (ddp: its 1-GPU run), for the runs that have one."""
        return {}

    def derive(self, results: HostResults) -> None:
        """Set figures derived from several runs on this suite's runs, on their records (run.record["derived"],
        run.record["notes"])."""

    def warnings(self, run: Run, results: HostResults) -> list:
        """The implausible figures of one ok run of this suite (bench.suites.base.warning each)."""
        return []
