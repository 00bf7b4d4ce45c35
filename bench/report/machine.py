"""The machine's side of a report: the concerns its fingerprint raised (health, a link narrower
than its slot, pairs without P2P, the host around the GPUs, the P2P gate), and what the NVML
counters saw during each launch and each run's timed steps (clocks, power, clocks held back, bytes
on each link, a PCIe link below its slot).
"""

from __future__ import annotations

import math

from bench.common.units import human_bytes
from bench.judging.verdicts import Clocks
from bench.report.document import Paragraph, Table
from bench.report.merge import Comparison


# --- What the fingerprint raised -----------------------------------------------------------

def concerns(comparison: Comparison) -> list:
    """One warning paragraph per host with concerns, and a note per host with GPU pairs without P2P."""
    blocks = []
    for host in comparison.hosts:
        lines = host.verdicts.concerns
        if lines:
            blocks.append(Paragraph(f"{host.name}: checked before the first launch\n" + "\n".join(lines), warning=True))
        missing = host.verdicts.without_p2p
        if missing:
            pairs = ", ".join(f"{a}→{b}" for a, b in missing)
            blocks.append(Paragraph(
                f"{host.name}: no P2P between {pairs} (as CUDA reports it): NCCL's `default` goes through host memory "
                "there, as `p2p_off` does, so `default` and `p2p_off` are the same path on this machine and their "
                "series differ only by noise."))
    return blocks


# --- Counters ------------------------------------------------------------------------------

def _gb(value: "int | None") -> str:
    return "-" if value is None else f"{value / 1e9:.3g}"


def _below_maximum(held: dict) -> str:
    """'1490 of 1980 MHz, 490 MHz (25%) below the maximum'."""
    gap = held["max_mhz"] - held["clock_mhz"]
    return f"{held['clock_mhz']:.0f} of {held['max_mhz']:.0f} MHz, {gap:.0f} MHz ({gap / held['max_mhz']:.0%}) below the maximum"


def _reasons(held: dict) -> str:
    return ", ".join(f"{name} {share:.0%}" for name, share in sorted(held["reasons"].items())) or "no reason given"


def _throttled(clocks: Clocks) -> str:
    """The table's cell: whether and how far the clocks were held back, and NVML's reasons then."""
    if clocks.state == "not measured":
        return "-"
    if clocks.held is None:
        return clocks.state
    held = clocks.held
    return f"{held['fraction']:.0%}: {_below_maximum(held)} ({_reasons(held)})"


def _held_back(where: str, clocks: Clocks) -> "str | None":
    """A warning line where the clocks were held back in enough of the samples to matter (Clocks.flagged)."""
    if not clocks.flagged:
        return None
    held = clocks.held
    return (f"{where} GPU{clocks.gpu['index']}: clocks held back in {held['fraction']:.0%} of the samples, "
            f"{_below_maximum(held)} (NVML's reasons: {_reasons(held)})")


def _sampler_cost(comparison: Comparison) -> "str | None":
    """The sampler's own CPU time a second over every launch that says it."""
    cpu = duration = 0.0
    for host in comparison.hosts:
        for launch in host.host["launches"]:
            summary = launch.get("gpu_counters") or {}
            if summary.get("sampler_cpu_s") is not None and summary.get("sampler_duration_s"):
                cpu, duration = cpu + summary["sampler_cpu_s"], duration + summary["sampler_duration_s"]
    if not duration:
        return None
    return f"The sampler itself used {cpu / duration * 1000:.0f} ms of CPU a second."


def _launch_counters(comparison: Comparison) -> tuple[list, list]:
    """A row per launch and GPU, and the warning lines of the launches where a GPU's clocks were held back."""
    rows, flags = [], []
    for host in comparison.hosts:
        for launch in host.host["launches"]:
            for clocks in host.verdicts.launches.get(launch["id"], ()):
                gpu = clocks.gpu
                power = "-" if gpu["power_w_median"] is None else f"{gpu['power_w_median']:.0f}"
                limit = "-" if gpu["power_limit_w"] is None else f"{gpu['power_limit_w']:.0f}"
                rows.append([host.name, launch["id"], f"GPU{gpu['index']}",
                             "-" if gpu["sm_clock_mhz_median"] is None else f"{gpu['sm_clock_mhz_median']:.0f}",
                             "-" if gpu["mem_clock_mhz_median"] is None else f"{gpu['mem_clock_mhz_median']:.0f}",
                             f"{power} / {limit}",
                             "-" if gpu["temperature_c_max"] is None else f"{gpu['temperature_c_max']:.0f}",
                             _throttled(clocks),
                             f"{_gb(gpu['pcie_tx_bytes'])} / {_gb(gpu['pcie_rx_bytes'])}",
                             f"{_gb(gpu['nvlink_tx_bytes'])} / {_gb(gpu['nvlink_rx_bytes'])}"])
                flags.append(_held_back(f"{host.name} {launch['id']}", clocks))
    return rows, [flag for flag in flags if flag]


def _per_step(gpu: dict, link: str) -> str:
    tx, rx = (gpu.get(f"{link}_{way}_bytes_per_step") for way in ("tx", "rx"))
    return " / ".join("-" if value is None else human_bytes(round(value)) for value in (tx, rx))


def _collective_link(entry) -> "str | None":
    """The link a run's collective data crossed: NVLink where NCCL went peer to peer between GPUs
    joined by NVLink, PCIe where it went through host memory, the network or PCIe peer to peer."""
    used = set(entry.run.transport["nccl_used"])
    if used & {"SHM"} or any(name.startswith("NET") for name in used):
        return "PCIe"
    if "P2P" in used:
        return {"nvlink": "NVLink", "pcie": "PCIe"}.get(entry.host.link.get("link_class"))
    return None


def _data(entry, gpu: dict) -> str:
    """The table's cell: the collective data of a step, and its share of the PCIe traffic where it crossed PCIe."""
    data = entry.suite.collective_bytes(entry.run)
    if data is None or not math.isfinite(data):  # a figure past a float's range says nothing
        return "-"
    link = _collective_link(entry) if data else None
    rx = gpu.get("pcie_rx_bytes_per_step")
    if link == "PCIe" and rx:
        return f"{human_bytes(round(data))}, {data / rx:.0%} of PCIe rx"
    return human_bytes(round(data)) + (f", over {link}" if link else "")


def _run_counters(comparison: Comparison) -> tuple[list, list]:
    """A row per run and GPU of the suites that move their data through collectives (the traffic of a
    step on each link beside the data its collectives moved), and the warning lines of every run where a GPU's clocks were held back
    while it was timed."""
    rows, flags = [], []
    for entry in comparison.runs:
        what = f"{entry.host.name} {entry.run.launch_id} ({entry.label})"
        for clocks in entry.verdicts.clocks:
            gpu = clocks.gpu
            flags.append(_held_back(what, clocks))
            if entry.suite.moves_collective_data:
                rows.append([entry.host.name, entry.label, entry.series.transport_label, f"GPU{gpu['index']}",
                             _per_step(gpu, "pcie"), _per_step(gpu, "nvlink"), _data(entry, gpu), _throttled(clocks)])
    return rows, [flag for flag in flags if flag]


def _asleep(comparison: Comparison) -> list[str]:
    """A line per run and GPU whose PCIe link never reached its slot's generation or width while the
    run was timed (NVML's reading in every sample of the window): asleep, or trained down."""
    return [f"{entry.host.name} {entry.run.launch_id} ({entry.label}) GPU{link['index']}: PCIe {link['gen']}.0 "
            f"x{link['width'] or '?'} at most while measured, its slot allows {link['gen_max']}.0 x{link['width_max']}"
            for entry in comparison.runs for link in entry.verdicts.below_slot]


def counters(comparison: Comparison) -> list:
    """The launches' counters, the traffic on each link of the steps of every run that moves its data
    through collectives beside the data they moved, and a warning naming each launch and run where a GPU's
    clocks were held back below its maximum."""
    launch_rows, launch_flags = _launch_counters(comparison)
    run_rows, run_flags = _run_counters(comparison)
    blocks, cost = [], _sampler_cost(comparison)
    if launch_rows:
        blocks.append(Paragraph(
            "NVML, read every tenth of a second or so during each launch: medians of the clocks and the power (against the "
            "enforced limit), the hottest reading, whether the clocks were held back (the share of samples whose SM clock "
            "lay more than 2% below the GPU's maximum while NVML named a reason other than idle, how far, and NVML's "
            "reasons then; NVML raises a reason such as sw_power_cap at the maximum clock too, which is not held back), "
            "and the bytes each GPU sent / received over PCIe (NVML's sampled throughput, integrated: an estimate, and of "
            "all the traffic, kernel launches included: an H200 fetched about 1.8 KB per eager kernel launch, about 2 "
            "bytes per kernel replayed from a CUDA graph) and NVLink (its byte counters) during the whole launch."
            + (f" {cost}" if cost else "")))
    if launch_flags or run_flags:
        blocks.append(Paragraph("Clocks held back while measuring:\n" + "\n".join(launch_flags + run_flags), warning=True))
    asleep = _asleep(comparison)
    if asleep:
        blocks.append(Paragraph("PCIe links below their slot while measuring (NVML's generation and width in every sample of "
                                "the timed calls: a link asleep, or trained down by a riser or the slot; the copies and "
                                "collectives through it ran slower):\n" + "\n".join(asleep), warning=True))
    if launch_rows:
        blocks.append(Table(["host", "launch", "GPU", "SM MHz", "memory MHz", "power W / limit", "max °C", "clocks held back",
                             "PCIe GB tx / rx (kernel launches included)", "NVLink GB tx / rx"], launch_rows))
    if run_rows:
        blocks += [Paragraph(
            "Per run that moves its data through collectives, the same counters over its timed steps only (not the "
            "warm-up; a collective call's step is one timed call): the PCIe traffic each GPU sent / received per step, "
            "kernel launches included, so a step of many small kernels shows PCIe traffic where no data crossed; the "
            "NVLink traffic; and the data the step's collectives moved per GPU each way (a DDP step's gradient "
            "all-reduce, 2(n-1)/n of its gradient bytes; an FSDP step's all-gathers and reduce-scatters, (n-1)/n of "
            "their sizes; a collective call's size times its bus factor), with its share of the PCIe rx where it "
            "crossed PCIe: the rest is the GPU fetching its work and the step's inputs. -: fewer than two samples, not "
            "measured."),
            Table(["host", "run", "transport", "GPU", "PCIe traffic per step tx / rx (kernel launches included)",
                   "NVLink per step tx / rx", "collective data per step, each way", "clocks held back"], run_rows)]
    return blocks
