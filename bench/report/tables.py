"""Markdown tables: per host the fingerprint summary, per suite the medians with spread and n."""

from __future__ import annotations

from bench.bundle.links import link_summary


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.4g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def spread(metric: dict, fmt: str) -> str:
    s = metric["summary"]
    return f"{s['median']:{fmt}} [{s['p5']:{fmt}}, {s['p95']:{fmt}}] n={s['n']}"


def transport_label(run: dict) -> str:
    t = run["transport"]
    label = t["preset"] if t["backend"] == "nccl" else f"{t['preset']} (gloo)"
    if t["nccl_used"]:
        label += " via " + "+".join(t["nccl_used"])
    if not t["matches_preset"]:
        label += " **MISMATCH**"
    return label


def hosts_table(bundles: list[dict]) -> list[str]:
    rows = []
    for bundle in bundles:
        for host in bundle["hosts"]:
            fp = host["fingerprint"] or {}
            link = link_summary(fp) if fp else {"link_label": "unknown"}
            software = fp.get("software", {})
            container = fp.get("container") or {}
            rows.append([
                host["name"], host["status"] + (f": {host['error']}" if host.get("error") else ""), link["link_label"],
                (fp.get("cpu") or {}).get("model") or "?", str(fp.get("driver_version") or "-"),
                str(software.get("torch") or "-"), str(software.get("nccl") or "-"),
                (container.get("digest") or "-")[:19],
            ])
    return _table(["host", "status", "GPUs and link", "CPU", "driver", "torch", "NCCL", "image digest"], rows)


def collectives_table(bundles: list[dict]) -> list[str]:
    rows = []
    for bundle in bundles:
        for host in bundle["hosts"]:
            for run in host["runs"]:
                if run["suite"] != "collectives":
                    continue
                p = run["params"]
                where = f"{p['src_rank']}->{p['dst_rank']}" if "src_rank" in p else ""
                if run["status"] != "ok":
                    figures = [f"{run['status']}: {run.get('error')}", "", ""]
                else:
                    m = run["metrics"]
                    figures = [spread(m["busbw_gbps"], ".3g"), spread(m["algbw_gbps"], ".3g"), f"{m['time_s']['summary']['median'] * 1e6:.4g}"]
                rows.append([
                    host["name"], f"{p['op']} {where}".strip(), p["dtype"], "in" if p["in_place"] else "out",
                    transport_label(run), str(run["world_size"]), human_bytes(p["size_bytes"]), *figures,
                ])
    if not rows:
        return []
    return _table(["host", "op", "dtype", "place", "transport", "ranks", "size", "busbw GB/s", "algbw GB/s", "time us"], rows)


def ddp_table(bundles: list[dict]) -> list[str]:
    rows = []
    for bundle in bundles:
        for host in bundle["hosts"]:
            for run in host["runs"]:
                if run["suite"] != "ddp":
                    continue
                p = run["params"]
                head = [host["name"], p["model"], p["precision"], transport_label(run), str(run["world_size"]),
                        str(p.get("global_batch", "?")), str(p.get("grad_accum", "?"))]
                if run["status"] != "ok":
                    rows.append(head + [f"{run['status']}: {run.get('error')}", "", "", "", "", ""])
                    continue
                m = run["metrics"]
                efficiency = (run.get("derived") or {}).get("scaling_efficiency_fraction")
                mfu = m.get("mfu_fraction")
                rows.append(head + [
                    spread({"summary": {k: v * 1e3 if k != "n" else v for k, v in m["step_time_s"]["summary"].items()}}, ".4g"),
                    f"{m['samples_per_s']['summary']['median']:.4g}",
                    f"{m['per_sample_gpu_time_s']['summary']['median'] * 1e3:.4g}",
                    f"{efficiency:.1%}" if efficiency is not None else "-",
                    f"{mfu['summary']['median']:.1%}" if mfu else "-",
                    human_bytes(m["peak_memory_bytes"]["summary"]["max"]),
                ])
    if not rows:
        return []
    return _table(
        ["host", "model", "precision", "transport", "GPUs", "global batch", "accum", "step ms", "samples/s",
         "per-sample x GPUs ms", "scaling", "MFU", "peak memory"],
        rows,
    )
