"""A run record, read: the typed view every suite hook, the report and verify read a bundle's run
through (schema/bundle.schema.json, hosts[].runs[]).

The JSON dict stays what is on disk and what is written: the view wraps it, copies nothing and sets
nothing. What assembles a bundle (a suite's derived figures, its warnings) writes the dict itself,
through `record`.
"""

from __future__ import annotations


class Run:
    """One run of a bundle's host, read-only. Its fields are read from the record each time, so a
    figure derived onto the record after the view was made is seen."""

    __slots__ = ("record", "_backend")

    def __init__(self, record: dict, backend: "str | None" = None):
        """backend: the launch's, for a record its ranks just wrote, which has no transport yet
        (a progress line's label): the only transport field such a run is read for."""
        self.record = record
        self._backend = backend

    def __repr__(self) -> str:
        return f"Run({self.suite!r}, {self.world_size} ranks, {self.status!r})"

    # --- what was run -----------------------------------------------------------------------

    @property
    def suite(self) -> str:
        return self.record["suite"]

    @property
    def params(self) -> dict:
        return self.record["params"]

    @property
    def world_size(self) -> int:
        return self.record["world_size"]

    @property
    def launch_id(self) -> str:
        return self.record["launch_id"]

    @property
    def repeat(self) -> int:
        """Which repeat of its plan entry it is (1 in a bundle from before repeats were recorded)."""
        return self.record.get("repeat", 1)

    @property
    def profiled_in(self) -> "str | None":
        """The launch that profiled its configuration's kernels, where it profiled none itself (a repeat)."""
        return self.record.get("profiled_in")

    @property
    def gpus(self) -> "list | None":
        """The GPUs its plan entry named; None where it named none."""
        return self.record.get("gpus")

    @property
    def env(self) -> dict:
        """Its plan entry's environment ({} for none)."""
        return self.record.get("env") or {}

    # --- how it ran ---------------------------------------------------------------------------

    @property
    def status(self) -> str:
        return self.record["status"]

    @property
    def ok(self) -> bool:
        return self.record["status"] == "ok"

    @property
    def error(self) -> "str | None":
        return self.record.get("error")

    @property
    def transport(self) -> dict:
        """What carried its bytes: preset, backend, what NCCL used (bundle schema: transport)."""
        return self.record["transport"]

    @property
    def preset(self) -> str:
        return self.record["transport"]["preset"]

    @property
    def backend(self) -> "str | None":
        if self._backend is not None:
            return self._backend
        return (self.record.get("transport") or {}).get("backend")

    @property
    def on_gpu(self) -> bool:
        """Whether its ranks computed on GPUs: gloo's ranks train on the CPU, on a GPU host too."""
        return self.backend != "gloo"

    # --- what it measured ---------------------------------------------------------------------

    @property
    def metrics(self) -> dict:
        return self.record["metrics"]

    def metric(self, name: str) -> "dict | None":
        """One metric's record (samples, summary, unit); None where the run has no such metric."""
        return self.record["metrics"].get(name)

    def median(self, name: str) -> "float | None":
        """The median of one metric; None where the run has no such metric."""
        found = self.metric(name)
        return found["summary"]["median"] if found else None

    def samples(self, name: str) -> list:
        """One metric's samples; [] where the run has no such metric."""
        found = self.metric(name)
        return found["samples"] if found else []

    @property
    def sampling(self) -> "dict | None":
        """How its sampling toward the plan's precision target ended: the target, the half-width reached,
        whether it was met and what stopped it (bundle schema: run.sampling); None where none was asked."""
        return self.record.get("sampling")

    @property
    def gpu_counters(self) -> "dict | None":
        return self.record.get("gpu_counters")

    @property
    def timeline(self) -> dict:
        """Its step timeline, where its suite records one ({} for none)."""
        return self.record.get("timeline") or {}

    # --- what was made of it --------------------------------------------------------------

    @property
    def derived(self) -> dict:
        """Figures derived from several runs (scaling, exposed communication); {} for none."""
        return self.record.get("derived") or {}

    @property
    def notes(self) -> list:
        return self.record.get("notes", [])

    @property
    def warnings(self) -> list:
        return self.record.get("warnings", [])
