"""Every figure of a bundle, as the export formats name it: each run's figures its suite gives
(Suite.figures, what "is my number normal?" judges), with the host, the run's label and its link, and
where two runs share those, the params that tell them apart."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bench import suites
from bench.common.run import Run
from bench.common.transports import with_setting
from bench.suites.base import Figure


@dataclass(frozen=True)
class Placed:
    host: str
    label: str  # the run as its suite says it: "all_reduce float32 1 MiB, 2 ranks"
    link: str  # its preset and setting: "default", "default, NCCL's tree algorithm"
    repeat: int
    figure: Figure
    params: dict
    variant: str = ""  # "in_place=False": the params that tell it from a run of the same label and link

    def name(self) -> str:
        """One line that tells the figure's run from every other of the bundle."""
        again = f" (repeat {self.repeat})" if self.repeat > 1 else ""
        variant = f" ({self.variant})" if self.variant else ""
        return f"{self.host}: {self.label}{variant} over {self.link}{again}"


def figures(bundle: dict) -> list[Placed]:
    """Every figure with a value of the bundle's ok runs, in the bundle's order."""
    found = []
    for host in bundle["hosts"]:
        for run in map(Run, host["runs"]):
            if not run.ok:
                continue
            suite = suites.get(run.suite)
            found += [Placed(host["name"], suite.label(run), with_setting(run.preset, run), run.repeat, figure, run.params)
                      for figure in suite.figures(run) if figure.value is not None]
    alike: dict = {}
    for placed in found:
        alike.setdefault((placed.name(), placed.figure.name), []).append(placed)
    varied = {}
    for group in alike.values():
        keys = sorted({key for placed in group for key in placed.params if len({repr(p.params.get(key)) for p in group}) > 1})
        varied.update({id(placed): " ".join(f"{key}={placed.params.get(key)}" for key in keys) for placed in group})
    return [replace(placed, variant=varied[id(placed)]) for placed in found]
