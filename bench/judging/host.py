"""What the judging reads of a host's fingerprint, read once for all its runs: its GPUs' names,
whether NVLink joins them, each GPU's PCIe link and its maximum SM clock, the pairs without P2P."""

from __future__ import annotations

from dataclasses import dataclass

from bench.common.links import link_summary, pairs_without_p2p, pcie_links


@dataclass(frozen=True)
class Host:
    fingerprint: dict  # {} where the host has none
    gpu_names: tuple  # by position, None where a GPU has no name
    nvlink: bool  # NVLink joins its GPUs (bench.common.links.link_summary)
    pcie: tuple  # each GPU's PCIe link (bench.common.links.pcie_links)
    max_sm_clocks: dict  # GPU index -> its maximum SM clock as the fingerprint read it
    without_p2p: tuple  # the ordered GPU pairs CUDA says cannot reach each other's memory

    @classmethod
    def of(cls, fingerprint: "dict | None") -> "Host":
        fp = fingerprint or {}
        gpus = fp.get("gpus") or []
        return cls(fp, tuple(gpu.get("name") for gpu in gpus), link_summary(fp)["link_class"] == "nvlink", tuple(pcie_links(fp)),
                   {gpu.get("index", i): gpu.get("max_sm_clock_mhz") for i, gpu in enumerate(gpus)}, tuple(pairs_without_p2p(fp)))

    def pcie_of(self, gpus: list) -> list[dict]:
        """The PCIe links of these GPUs (by index)."""
        return [link for link in self.pcie if link["index"] in gpus]
