"""The report's tables: per host the fingerprint summary, per suite the medians with spread and n.

Rows follow the plots' series (a row pools the samples of its series' runs), and a figure is
always written "median [p5, p95] n=N", so a reader can tell a solid number from a noisy one.
"""

from __future__ import annotations

from collections import defaultdict

from bench.common.links import pcie_links
from bench.common.stats import Spread
from bench.common.units import plain, time_unit
from bench.report.document import Bullets, Paragraph, Table
from bench.report.merge import Comparison, HostEntry, RunEntry
from bench.report.series import pooled


def spread(value: "Spread | None", factor: float = 1.0, digits: int = 3) -> str:
    if value is None:  # an ok run of a bundle that recorded no samples of this metric
        return "-"
    v = value.scaled(factor)
    return f"{plain(v.median, digits)} {_ends(v, digits)} n={v.n}"


def time_spread(value: "Spread | None", digits: int = 4) -> str:
    """A time in seconds, "20.2 [17.0, 29.3] ms n=12", in the unit (s, ms, µs, ns) that puts its median
    between 1 and 1000: a column of times from µs to s stays readable without e-notation."""
    if value is None:
        return "-"
    factor, unit = time_unit([abs(value.median)] if value.median else [])
    v = value.scaled(factor)
    return f"{plain(v.median, digits)} {_ends(v, digits)} {unit} n={v.n}"


def seconds(value: float, digits: int = 4) -> str:
    """One time in seconds as "20.22 ms", in the unit that puts it between 1 and 1000."""
    factor, unit = time_unit([abs(value)] if value else [])
    return f"{plain(value * factor, digits)} {unit}"


def percent_spread(value: "Spread | None") -> str:
    if value is None:  # a ratio with nothing to divide by (a figure of 0 below it)
        return "-"
    v = value.scaled(100)
    ends = "[-, -]" if v.low is None else f"[{v.low:.1f}, {v.high:.1f}]"
    return f"{v.median:.1f}% {ends} n={v.n}"


def _ends(v: Spread, digits: int) -> str:
    """"[low, high]", or "[-, -]" for a ratio with no interval (a sample of 0 below it)."""
    return "[-, -]" if v.low is None else f"[{plain(v.low, digits)}, {plain(v.high, digits)}]"


def pooled_spread(entries: list[RunEntry], metric: str) -> "Spread | None":
    samples = pooled(entries, metric)
    return Spread.of(samples) if samples else None


def flags(entries: list[RunEntry]) -> str:
    """" ⚠ code, ..." for the warnings of a row's runs (the warnings table below says why), else ""."""
    codes = sorted({w["code"] for e in entries for w in e.run.warnings})
    return f" ⚠ {', '.join(codes)}" if codes else ""


def series_cells(entries: list[RunEntry]) -> list[str]:
    series = entries[0].series
    hosts = sorted({e.host.name for e in entries})
    host = series.host or (hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts")
    return [f"{host} (busy)" if series.busy else host, series.hardware, series.transport_label]


def hardware_header(comparison: Comparison) -> str:
    """The column series_cells fills with a host's hardware: its GPUs and link, or where no host has a GPU, its CPU."""
    return "hardware" if comparison.ranks.cpu else "GPUs and link"


def bundles_cell(entries: list[RunEntry]) -> str:
    return str(len({e.host.bundle for e in entries}))


def grouped(entries: list[RunEntry], key) -> list[tuple[tuple, list[RunEntry]]]:
    """Rows: the entries of each (series, *key(entry)), in order."""
    groups = defaultdict(list)
    for entry in entries:
        groups[(entry.series, *key(entry))].append(entry)
    return sorted(groups.items(), key=lambda item: item[0])


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


def failed_hosts(comparison: Comparison) -> list[HostEntry]:
    """The hosts that failed and measured nothing. A healthy member of a multi-node group measured nothing
    of its own (its group's runs are on the first member's entry) and did not fail."""
    ok = {id(entry.host) for entry in comparison.runs}
    return [host for host in comparison.hosts if id(host) not in ok and host.host["status"] != "ok"]


def _status(raw: dict) -> str:
    return raw["status"] + (f": {raw['error']}" if raw.get("error") else "")


def hosts_table(comparison: Comparison) -> Table:
    """Every host of the bundles, one that failed among them with its status."""
    if comparison.ranks.cpu:
        return _cpu_hosts_table(comparison)
    rows = []
    for host in comparison.hosts:
        fp, raw = host.fingerprint, host.host
        software = fp.get("software") or {}
        gpus = fp.get("gpus") or []
        rows.append([
            host.name + (f" ({', '.join(raw['labels'])})" if raw["labels"] else ""), host.run_id, _status(raw),
            " + ".join(sorted({g["name"] for g in gpus})) or "none", str(len(gpus)), _link(host), _pcie(fp),
            str(fp.get("driver_version") or "-"), str(software.get("torch") or "-"), str(software.get("nccl") or "-"),
            _digest(fp), host.tool_version,
        ])
    return Table(["host (labels)", "bundle", "status", "GPU", "count", "link", "PCIe in use (max)", "driver", "torch",
                  "NCCL", "image", "ddpbench"], rows)


def _cpu_hosts_table(comparison: Comparison) -> Table:
    """The hosts where none has a GPU: each one's CPU, its cores and its software."""
    rows = []
    for host in comparison.hosts:
        fp, raw = host.fingerprint, host.host
        cpu = fp.get("cpu") or {}
        rows.append([host.name + (f" ({', '.join(raw['labels'])})" if raw["labels"] else ""), host.run_id, _status(raw),
                     str(cpu.get("model") or "-"), str(cpu.get("logical_cpus") or "-"),
                     str((fp.get("software") or {}).get("torch") or "-"), _digest(fp), host.tool_version])
    return Table(["host (labels)", "bundle", "status", "CPU", "cores", "torch", "image", "ddpbench"], rows)


# --- Implausible figures ------------------------------------------------------------------

def warnings_table(comparison: Comparison, suite: str) -> "Table | None":
    """Every flagged figure of a suite's runs, with what is wrong and its likely cause."""
    rows = [[e.host.name, e.host.run_id, e.label, e.series.transport_label, w["code"], w["message"], w["likely_cause"]]
            for e in comparison.runs if e.run.suite == suite for w in e.run.warnings]
    if not rows:
        return None
    return Table(["host", "bundle", "what", "transport", "warning", "figure", "likely cause"], rows)


def warnings_blocks(comparison: Comparison, suite: str) -> list:
    """The flagged figures of a suite's runs, right after the table that marks them ⚠."""
    table = warnings_table(comparison, suite)
    if table is None:
        return []
    return [Paragraph(f"{len(table.rows)} flagged figure(s), marked ⚠ in the table above: implausible ones, which no correct "
                      "measurement gives, or ones the host made doubtful (a path the P2P gate found wrong, ranks split over "
                      "NUMA nodes). Read them with their likely cause before trusting the figures around them.", warning=True),
            table]


# --- What failed ----------------------------------------------------------------------------

def failed_hosts_lines(comparison: Comparison) -> "Bullets | None":
    """One line per host that failed and measured nothing: its name, bundle and why."""
    lines = [f"{host.name} (bundle {host.run_id}): {_status(host.host)}" for host in failed_hosts(comparison)]
    return Bullets(lines) if lines else None


def failures_table(comparison: Comparison) -> "Table | None":
    rows = [[e.host.name, e.host.run_id, e.run.suite, e.label, e.series.transport_label, e.run.status,
             e.run.error or "-"] for e in comparison.failed]
    for host in comparison.hosts:
        for launch in host.host["launches"]:
            if launch["status"] in ("failed", "timeout"):
                rows.append([host.name, host.run_id, launch["suite"], f"launch {launch['id']}", launch["preset"],
                             launch["status"], launch.get("error") or "-"])
    if not rows:
        return None
    return Table(["host", "bundle", "suite", "what", "transport", "status", "error"], rows)
