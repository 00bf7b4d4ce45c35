"""The report's tables: per host the fingerprint summary, per suite the medians with spread and n.

Rows follow the plots' series (a row pools the samples of its series' runs), and a figure is
always written "median [p5, p95] n=N", so a reader can tell a solid number from a noisy one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from bench.common.concerns import pcie_links
from bench.common.stats import LEVEL_LABEL, Spread
from bench.report.document import Table
from bench.report.merge import Comparison, HostEntry, RunEntry, configuration
from bench.report.units import human_bytes
from bench.report.series import Bar, Prediction, group_label, pooled, workload


def spread(value: "Spread | None", factor: float = 1.0, fmt: str = ".3g") -> str:
    if value is None:  # an ok run of a bundle that recorded no samples of this metric
        return "-"
    v = value.scaled(factor)
    return f"{v.median:{fmt}} {_ends(v, fmt)} n={v.n}"


def _percent(value: Spread) -> str:
    v = value.scaled(100)
    return f"{v.median:.1f}% {_ends(v, '.1f')} n={v.n}"


def _ends(v: Spread, fmt: str) -> str:
    """"[low, high]", or "[-, -]" for a ratio with no interval (a sample of 0 below it)."""
    return "[-, -]" if v.low is None else f"[{v.low:{fmt}}, {v.high:{fmt}}]"


def _pooled(entries: list[RunEntry], metric: str) -> "Spread | None":
    samples = pooled(entries, metric)
    return Spread.of(samples) if samples else None


def _flags(entries: list[RunEntry]) -> str:
    """" ⚠ code, ..." for the warnings of a row's runs (the warnings table below says why), else ""."""
    codes = sorted({w["code"] for e in entries for w in e.run.get("warnings", [])})
    return f" ⚠ {', '.join(codes)}" if codes else ""


def _series_cells(entries: list[RunEntry]) -> list[str]:
    series = entries[0].series
    hosts = sorted({e.host.name for e in entries})
    host = series.host or (hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts")
    return [host, series.hardware, series.transport_label]


def _bundles(entries: list[RunEntry]) -> str:
    return str(len({e.host.bundle for e in entries}))


def _grouped(entries: list[RunEntry], key) -> list[tuple[tuple, list[RunEntry]]]:
    """Rows: the entries of each (series, *key(entry)), in order."""
    groups = defaultdict(list)
    for entry in entries:
        groups[(entry.series, *key(entry))].append(entry)
    return sorted(groups.items(), key=lambda item: item[0])


def _ddp_key(entry: RunEntry) -> tuple:
    # One baseline row per machine and shape: with one rank the transport preset changes nothing.
    series = entry.series if entry.run["world_size"] > 1 else replace(entry.series, transport="", mismatch=False)
    return (series, workload(entry), entry.params["global_batch"], entry.run["world_size"])


# --- Hosts ----------------------------------------------------------------------------------

def _pcie(fp: dict) -> str:
    """The link per GPU as the label uses it: under load where measured ("4.0 x8 loaded"), else at rest."""
    links = sorted({(l["gen"], l["width"], l["loaded"], l["gen_max"], l["width_max"]) for l in pcie_links(fp)}, key=str)
    if not links:
        return "-"
    return ", ".join(f"{gen or '?'}.0 x{width or '?'}{' loaded' if loaded else ''} (max {gmax or '?'}.0 x{wmax or '?'})"
                     for gen, width, loaded, gmax, wmax in links)


def _link(host: HostEntry) -> str:
    label = host.link["link_label"]
    link = label.split(", ", 1)[1] if ", " in label else label
    peak = host.link.get("link_peak_gbps")
    return f"{link} ({peak:.4g} GB/s peak)" if peak else link


def _digest(fp: dict) -> str:
    container = fp.get("container") or {}
    digest = container.get("digest")
    if digest:
        algorithm, _, value = digest.partition(":")
        return f"{algorithm}:{value[:12]}" if value else digest[:19]
    return container.get("image") or "-"


def hosts_table(comparison: Comparison) -> Table:
    rows = []
    for host in comparison.hosts:
        fp, raw = host.fingerprint, host.host
        software = fp.get("software") or {}
        gpus = fp.get("gpus") or []
        status = raw["status"] + (f": {raw['error']}" if raw.get("error") else "")
        rows.append([
            host.name + (f" ({', '.join(raw['labels'])})" if raw["labels"] else ""), host.run_id, status,
            " + ".join(sorted({g["name"] for g in gpus})) or "none", str(len(gpus)), _link(host), _pcie(fp),
            str(fp.get("driver_version") or "-"), str(software.get("torch") or "-"), str(software.get("nccl") or "-"),
            _digest(fp), host.tool_version,
        ])
    return Table(["host (labels)", "bundle", "status", "GPU", "count", "link", "PCIe in use (max)", "driver", "torch",
                  "NCCL", "image", "ddpbench"], rows)


# --- Collectives ----------------------------------------------------------------------------

def collectives_table(comparison: Comparison) -> "Table | None":
    entries = [e for e in comparison.runs if e.run["suite"] == "collectives" and e.params["op"] != "sendrecv"]
    rows = []
    for key, group in _grouped(entries, lambda e: (e.params["op"], e.params["dtype"], e.params["in_place"],
                                                   e.run["world_size"], e.params["size_bytes"])):
        _, op, dtype, in_place, ws, size = key
        time = _pooled(group, "time_s")
        rows.append([*_series_cells(group), op, dtype, "in" if in_place else "out", str(ws), human_bytes(size),
                     spread(_pooled(group, "busbw_gbps")) + _flags(group), spread(_pooled(group, "algbw_gbps")),
                     spread(time, 1e6, ".4g") if time else "-", _bundles(group)])
    if not rows:
        return None
    return Table(["host", "GPUs and link", "transport", "op", "dtype", "place", "ranks", "size",
                  "busbw GB/s median [p5, p95]", "algbw GB/s median [p5, p95]", "time µs median [p5, p95]", "bundles"], rows)


def p2p_table(comparison: Comparison) -> "Table | None":
    entries = [e for e in comparison.runs if e.run["suite"] == "collectives" and e.params["op"] == "sendrecv"]
    rows = []
    for key, group in _grouped(entries, lambda e: (e.run["world_size"], e.params["dtype"], e.params["size_bytes"],
                                                   e.params["src_rank"], e.params["dst_rank"])):
        _, ws, dtype, size, src, dst = key
        rows.append([*_series_cells(group), str(ws), dtype, human_bytes(size), f"{src} → {dst}",
                     spread(_pooled(group, "busbw_gbps")), _bundles(group)])
    if not rows:
        return None
    return Table(["host", "GPUs and link", "transport", "ranks", "dtype", "size", "source → destination",
                  "busbw GB/s median [p5, p95]", "bundles"], rows)


# --- DDP ------------------------------------------------------------------------------------

def ddp_table(comparison: Comparison, bars: list[Bar], predictions: list[Prediction]) -> "Table | None":
    """Step times per series and configuration, with the scaling efficiency and prediction of the plots."""
    entries = [e for e in comparison.runs if e.run["suite"] == "ddp"]
    efficiency = {(bar.series, bar.group): bar.value for bar in bars}
    predicted = {(p.series, p.group): p.predicted for p in predictions}
    rows = []
    groups = defaultdict(list)
    for entry in entries:
        groups[_ddp_key(entry)].append(entry)
    for key, group in sorted(groups.items(), key=lambda item: item[0]):
        series, w, batch, ws = key
        label = group_label((w, batch, ws))
        eff = efficiency.get((series, label))
        mfu = _pooled(group, "mfu_fraction")
        memory = max(s for e in group for s in e.samples("peak_memory_bytes")) if group[0].samples("peak_memory_bytes") else None
        rows.append([
            *(_series_cells(group) if ws > 1 else [_series_cells(group)[0], series.hardware, "1 GPU (baseline)"]),
            w.model, w.recipe, str(ws), str(batch), str(group[0].params.get("grad_accum", "-")),
            spread(_pooled(group, "step_time_s"), 1e3, ".4g"),
            spread(_pooled(group, "per_sample_gpu_time_s"), 1e3, ".4g"),
            spread(_pooled(group, "samples_per_s"), 1, ".4g"),
            (_percent(eff) if eff else ("100% (baseline)" if ws == 1 else "-")) + _flags(group),
            f"{predicted[(series, label)] * 1e3:.4g}" if (series, label) in predicted else "-",
            _percent(mfu) if mfu else "-",
            human_bytes(memory) if memory is not None else "-",
            _bundles(group),
        ])
    if not rows:
        return None
    return Table(["host", "GPUs and link", "transport", "model", "recipe", "GPUs", "global batch", "accum",
                  "step ms median [p5, p95]", "per-sample × GPUs ms", "samples/s", f"scaling % [{LEVEL_LABEL}]",
                  "predicted step ms", "MFU %", "peak memory", "bundles"], rows)


# --- Implausible figures ------------------------------------------------------------------

def warnings_table(comparison: Comparison, suite: str) -> "Table | None":
    """Every flagged figure of a suite's runs, with what is wrong and its likely cause."""
    rows = [[e.host.name, e.host.run_id, run_label(e.run), e.series.transport_label, w["code"], w["message"], w["likely_cause"]]
            for e in comparison.runs if e.run["suite"] == suite for w in e.run.get("warnings", [])]
    if not rows:
        return None
    return Table(["host", "bundle", "what", "transport", "warning", "figure", "likely cause"], rows)


# --- What failed ----------------------------------------------------------------------------

def run_label(run: dict) -> str:
    """What a run measured, in a few words (its configuration)."""
    key = configuration(run)
    if run["suite"] == "collectives":
        _, op, dtype, _, size, ws, src, dst = key
        pair = f" {src}→{dst}" if src is not None else ""
        return f"{op}{pair} {dtype} {human_bytes(size)}, {ws} ranks"
    if run["suite"] == "copy":
        _, direction, engine, both, src, dst, size = key
        return f"{direction} {engine}{' both ways' if both else ''} {src}→{dst} {human_bytes(size)}"
    _, model, recipe, seq_len, micro, batch, ws = key
    return f"{model} {recipe}, batch {batch}, {ws} GPUs"


def failures_table(comparison: Comparison) -> "Table | None":
    rows = [[e.host.name, e.host.run_id, e.run["suite"], run_label(e.run), e.series.transport_label, e.run["status"],
             e.run.get("error") or "-"] for e in comparison.failed]
    for host in comparison.hosts:
        for launch in host.host["launches"]:
            if launch["status"] in ("failed", "timeout"):
                rows.append([host.name, host.run_id, launch["suite"], f"launch {launch['id']}", launch["preset"],
                             launch["status"], launch.get("error") or "-"])
    if not rows:
        return None
    return Table(["host", "bundle", "suite", "what", "transport", "status", "error"], rows)
