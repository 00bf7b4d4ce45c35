"""What a fingerprint says that a reader must be told before trusting a number, one line each:
other processes on the GPUs, memory errors, a power limit below the default, clocks held back at
rest, a PCIe link narrower under load than its slot allows, NVLinks inactive under load, GPU pairs
without peer access; and what a rented or consumer box gets wrong, each line with its fix: a link
that reads asleep and was never read awake, ACS on the PCIe path between GPUs, a small /dev/shm,
GPUs split over NUMA nodes, persistence mode off, the IOMMU translating the GPUs' transfers; and what
the P2P gate before training found wrong (bench/agent/gate.py), and ranks placed off their GPU's NUMA node.

The agent prints these lines before its first launch, and the report and `verify` read them
from a bundle's fingerprints.
"""
from __future__ import annotations

from bench.common.cpulist import parse_cpulist
from bench.common.links import nvlink_links, pcie_links
from bench.common.units import human_bytes
from bench.judging.counters import BENIGN_REASONS

GIB = 1 << 30
MIB = 1 << 20
# NCCL's troubleshooting guide asks a container for `--shm-size=1g`; Docker's default is 64 MiB.
SHM_NEEDED_BYTES = 1 << 30
# The ACS control bits that keep peer traffic from going straight across a bridge.
ACS_P2P_REDIRECTING = ("ReqRedir", "CmpltRedir", "EgressCtrl")


def _narrow_links(pcie: list) -> list[str]:
    """GPUs whose link, measured under load, runs below the generation or width its slot allows."""
    lines = []
    for link in pcie:
        if not link["loaded"] or link["gen_max"] is None or link["width_max"] is None:
            continue
        if link["gen"] < link["gen_max"] or link["width"] < link["width_max"]:
            lines.append(f"GPU{link['index']}: PCIe link under load is {link['gen']}.0 x{link['width']}, "
                         f"its slot allows {link['gen_max']}.0 x{link['width_max']}")
    return lines


def _idle_nvlinks(nvlinks: list) -> list[str]:
    """GPUs with fewer NVLinks active while copying to a peer than at rest."""
    return [f"GPU{link['index']}: {link['active_links']} of its {link['active_links_rest']} NVLinks active under load"
            for link in nvlinks
            if link["loaded"] and link["active_links_rest"] and link["active_links"] < link["active_links_rest"]]


def _health_lines(gpu: dict) -> list[str]:
    name, lines = f"GPU{gpu['index']}", []
    processes = gpu.get("processes") or []
    if processes:
        held = sum(p["used_memory_bytes"] or 0 for p in processes)
        lines.append(f"{name}: {len(processes)} other process(es) on the GPU before the first launch, holding "
                     f"{held / GIB:.1f} GiB (pid {', '.join(str(p['pid']) for p in processes)})")
    if gpu.get("ecc_uncorrected_volatile"):
        lines.append(f"{name}: {gpu['ecc_uncorrected_volatile']} uncorrected ECC error(s) since the driver loaded")
    if gpu.get("row_remap_failed"):
        lines.append(f"{name}: a memory row remap failed: the GPU needs service")
    elif gpu.get("row_remap_pending"):
        lines.append(f"{name}: a memory row remap is pending until the GPU is reset")
    if gpu.get("retired_pages_pending"):
        lines.append(f"{name}: retired memory pages are pending until the GPU is reset")
    limit, default = gpu.get("power_limit_w"), gpu.get("power_limit_default_w")
    if limit is not None and default and limit < default * 0.99:
        lines.append(f"{name}: power limit {limit:g} W, below its default {default:g} W")
    held_back = sorted(set(gpu.get("clock_reasons_idle") or []) - BENIGN_REASONS)
    if held_back:
        lines.append(f"{name}: clocks held back at rest ({', '.join(held_back)}): locked or capped clocks")
    return lines


def _links_asleep_unmeasured(pcie: list) -> list[str]:
    """One note for the GPUs whose link reads below its slot's at rest and was never read under load:
    idle GPUs train their links down, so that reading may be a sleeping link, not a narrow one."""
    asleep = [link for link in pcie
              if not link["loaded"] and None not in (link["gen"], link["width"], link["gen_max"], link["width_max"])
              and (link["gen"] < link["gen_max"] or link["width"] < link["width_max"])]
    if not asleep:
        return []
    listed = ", ".join(f"GPU{link['index']} {link['gen']}.0 x{link['width']} (slot {link['gen_max']}.0 x{link['width_max']})"
                       for link in asleep)
    return [f"PCIe link below its slot at rest and never read under load: {listed}; an idle GPU trains its link "
            "down, so the link label and peak here are the at-rest values and a copy into a sleeping link runs slow "
            "(3.2 against 13.1 GB/s awake, club-3090 #1507); fix: wake the link before judging it: install "
            "nvidia-ml-py where the agent runs, so the fingerprint reads the link during a copy"]


def _p2p_possible(fp: dict, a: str, b: str) -> bool:
    """Whether GPU a may reach GPU b's memory peer to peer: as CUDA said under the link probe, else as
    the driver's `topo -p2p r` says, else (nothing tells) maybe."""
    access = (((fp.get("link_load") or {}).get("p2p_access")) or {}).get(a, {}).get(b)
    if access is not None:
        return access
    read = (((fp.get("topology") or {}).get("p2p_read")) or {}).get(a, {}).get(b)
    return read is None or read == "OK"


def acs_on_gpu_path(fp: dict) -> list[str]:
    """ACS redirecting peer traffic on a bridge between two GPUs that may use P2P (between GPUs
    without P2P, NCCL goes through host memory, which ACS does not touch)."""
    path = fp.get("pcie_path") or {}
    chains, bridges = path.get("gpus") or {}, path.get("bridges") or {}
    redirecting: set[str] = set()
    labels = sorted(chains, key=lambda label: int(label[3:]))
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if _p2p_possible(fp, a, b) or _p2p_possible(fp, b, a):
                between = set(chains[a]) ^ set(chains[b])  # the bridges below the one they share
                redirecting |= {bridge for bridge in between
                                if set((bridges.get(bridge) or {}).get("acs_ctl") or []) & set(ACS_P2P_REDIRECTING)}
    if not redirecting:
        return []
    named = ", ".join(f"{bridge} ({' '.join(bit + '+' for bit in bridges[bridge]['acs_ctl'] if bit in ACS_P2P_REDIRECTING)})"
                      for bridge in sorted(redirecting))
    return [f"ACS redirects peer-to-peer traffic on the PCIe path between the GPUs at {named}: GPU-to-GPU copies "
            "go up through the root complex, slower, or hang; fix: disable ACS (in the BIOS: ACS, or IOMMU/VT-d, "
            f"off; or after each boot `sudo setpci -s <bridge> ECAP_ACS+0x6.w=0000` on each bridge named), or run "
            "with NCCL_P2P_DISABLE=1"]


def small_dev_shm(fp: dict) -> list[str]:
    """/dev/shm too small for NCCL's shared-memory transport on a host with GPUs to join."""
    size = fp.get("dev_shm_total_bytes")
    if size is None or len(fp.get("gpus") or []) < 2 or size >= SHM_NEEDED_BYTES:
        return []
    return [f"/dev/shm is {size / MIB:.0f} MiB: NCCL's shared-memory transport (the `p2p_off` preset, and GPU pairs "
            f"without P2P) allocates its buffers there and fails to start when it is small (\"failed to extend "
            f"/dev/shm/nccl-...\"); it needs about {SHM_NEEDED_BYTES / GIB:.0f} GiB; fix: start the container with "
            "`--shm-size=1g` (or `--ipc=host`)"]


def _gpu_nodes(fp: dict) -> dict[str, int]:
    """GPU -> NUMA node, from sysfs where read, else from nvidia-smi's topology matrix."""
    nodes = ((fp.get("numa") or {}).get("gpu_nodes")) or {}
    if not nodes:
        affinity = ((fp.get("topology") or {}).get("numa_affinity")) or {}
        nodes = {gpu: int(node) for gpu, node in affinity.items() if node.strip().isdigit()}
    return {gpu: node for gpu, node in nodes.items() if node is not None}


def numa_split(fp: dict) -> list[str]:
    """GPUs on different NUMA nodes; and a GPU whose node has none of the CPUs the ranks may run on."""
    nodes, lines = _gpu_nodes(fp), []
    if len(set(nodes.values())) > 1:
        where = ", ".join(f"{gpu} on node {node}" for gpu, node in sorted(nodes.items(), key=lambda item: int(item[0][3:])))
        lines.append(f"GPUs split over NUMA nodes ({where}): traffic between them, and a rank's host memory where the "
                     "rank runs on the other node, cross the link between the sockets (a 4+4 split cost 85% a step on "
                     "a rented 8x H100); fix: bind each rank to its GPU's node (`torchrun --numa-binding=node`, torch "
                     "2.9 and later, or `numactl --cpunodebind=N --membind=N`), and compare only with machines split "
                     "the same way")
    numa = fp.get("numa") or {}
    allowed = parse_cpulist(numa.get("allowed_cpus"))
    for gpu, node in sorted(nodes.items(), key=lambda item: int(item[0][3:])):
        node_cpus = parse_cpulist((numa.get("node_cpus") or {}).get(str(node)))
        if allowed and node_cpus and not allowed & node_cpus:
            lines.append(f"{gpu} hangs off NUMA node {node}, but the ranks may run only on CPUs {numa['allowed_cpus']}, "
                         f"none of them on that node: its rank reaches it across the socket link; fix: give the agent "
                         f"CPUs of node {node} (e.g. `docker run --cpuset-cpus`, or the scheduler's CPU binding)")
    return lines


def persistence_off(fp: dict) -> list[str]:
    """GPUs with persistence mode off: the driver tears them down between launches."""
    off = [f"GPU{gpu.get('index', i)}" for i, gpu in enumerate(fp.get("gpus") or []) if gpu.get("persistence_mode") is False]
    if not off:
        return []
    return [f"persistence mode off on {', '.join(off)}: with no client the driver tears the GPUs down between "
            "launches, so each launch starts by initialising them again and its first steps meet cold clocks and "
            "links; fix: `sudo nvidia-smi -pm 1` (or run nvidia-persistenced)"]


def iommu_translated(fp: dict) -> list[str]:
    """An IOMMU translating the transfers of a host with GPUs to join."""
    iommu = fp.get("iommu") or {}
    if iommu.get("mode") != "translated" or len(fp.get("gpus") or []) < 2:
        return []
    domains = ", ".join(f"{gpu} {kind}" for gpu, kind in sorted((iommu.get("gpu_domain_types") or {}).items()) if kind)
    return [f"IOMMU in translated mode ({domains}): every peer-to-peer and host transfer of the GPUs goes through "
            "its page tables, which slows peer-to-peer copies or blocks them (NCCL may hang); fix: boot with "
            "`iommu=pt` (beside intel_iommu=on or amd_iommu=on), or turn the IOMMU off in the BIOS, or run with "
            "NCCL_P2P_DISABLE=1"]


GATE_OPS = {"all_reduce": "all_reduce", "send_recv": "send/recv", "device_copy": "device-to-device copies"}
P2P_FIX = ("fix: run with NCCL_P2P_DISABLE=1 (the p2p_off preset, or env in the hosts file), or reinstall or update the "
           "NVIDIA driver (a P2P-patched driver, or a kernel module that does not match it, are known causes), or turn ACS "
           "off on the PCIe bridges between the GPUs and the IOMMU to passthrough (`iommu=pt`)")


def gate_finding(arm: dict) -> str:
    """What one arm of the P2P gate found wrong, in a few words."""
    wrong = [check for check in arm["checks"] if check["wrong"]]
    if not wrong:
        return f"the ranks hung ({arm['error']})" if arm["status"] == "hung" else f"a rank failed ({arm['error']})"
    ops = [op for op in GATE_OPS if any(check["op"] == op for check in wrong)]
    said = "; ".join(f"{GATE_OPS[op]} wrong at "
                     + ", ".join(human_bytes(check["size_bytes"]) for check in wrong if check["op"] == op) for op in ops)
    hung = f"; then {arm['error']}" if arm["status"] == "wrong" and arm.get("error") else ""
    return f"{said} (first: {wrong[0]['wrong'][0]}){hung}"


def p2p_gate(fp: dict) -> list[str]:
    """What the P2P gate before training found wrong, one line each with its fix: its own arms' verdict,
    and the GPU pair NCCL's own diagnostics found failing."""
    gate = fp.get("gate")
    if not gate:
        return []
    planted = f" [planted fault {gate['planted_fault']}: a test, not this box]" if gate.get("planted_fault") else ""
    return _gate_verdict(gate, planted) + _nccl_diagnostics_failed(gate.get("nccl_diagnostics") or {}, planted)


def _nccl_diagnostics_failed(found: dict, planted: str) -> list[str]:
    """The gate's NCCL diagnostics arm, where NCCL found a GPU pair failing: the first pair, its path and
    NCCL's advice for it."""
    if found.get("status") != "failed":
        return []
    passed, tested, pairs = found["peer_accesses_passed"], found["peer_accesses_tested"], found["failed_pairs"]
    counted = (f"{tested - passed} of {tested} peer accesses failed" if passed is not None and tested is not None and passed < tested
               else "a GPU pair failing")
    named = ""
    if pairs:
        pair = pairs[0]
        more = f", and {len(pairs) - 1} more pair(s)" if len(pairs) > 1 else ""
        named = (f"; first GPU{pair['src_nvml_dev']}→GPU{pair['dst_nvml_dev']} (ranks {pair['src_rank']}→{pair['dst_rank']}) "
                 f"over path {pair['path']}: {pair['kind']}{more}")
    advice = f"{pairs[0]['advice']}, or " if pairs and pairs[0]["advice"] else ""
    return [f"P2P gate: NCCL's own diagnostics (NCCL_RUN_DIAGNOSTICS=1) found {counted}{named}: peer-to-peer transfers "
            f"between these GPUs are broken; fix: {advice}run with NCCL_P2P_DISABLE=1 (the p2p_off preset){planted}"]


def _gate_verdict(gate: dict, planted: str) -> list[str]:
    """The gate's own arms' verdict, where not ok."""
    if gate["verdict"] == "ok":
        return []
    arms = {arm["name"]: arm for arm in gate["arms"]}
    if {"p2p", "p2p_off"} - set(arms):  # a verdict other than ok rests on both arms
        return [f"P2P gate: verdict {gate['verdict']}, but the arms that say why are missing from this fingerprint{planted}"]
    between = "these GPUs" if gate["backend"] == "nccl" else "these ranks (gloo standing in for the GPUs' path)"
    if gate["verdict"] == "p2p_faulty":
        rerouted = len(gate["rerouted_launches"])
        went_on = (f"; the plan went on with P2P off (NCCL_P2P_DISABLE=1) for its {rerouted} default launch(es) of two or "
                   "more ranks, labelled \"P2P off by the gate\"" if rerouted else "")
        return [f"P2P gate: with P2P as this box has it, {gate_finding(arms['p2p'])}; with NCCL_P2P_DISABLE=1 every value "
                f"was right: peer-to-peer transfers between {between} are broken{went_on}; the runs that still used P2P "
                f"here are marked; {P2P_FIX}{planted}"]
    if gate["verdict"] == "p2p_off_faulty":
        return [f"P2P gate: with NCCL_P2P_DISABLE=1, {gate_finding(arms['p2p_off'])}, while P2P as this box has it was "
                "right: NCCL's path through host memory is broken here; the runs through host memory are marked; fix: a "
                "small /dev/shm is the usual cause: start the container with `--shm-size=1g` (or `--ipc=host`), or "
                f"leave P2P on{planted}"]
    return [f"P2P gate: with P2P, {gate_finding(arms['p2p'])}; with NCCL_P2P_DISABLE=1, {gate_finding(arms['p2p_off'])}: "
            f"neither path between {between} is right, and the runs over either are marked; fix: check the driver "
            "(`dmesg` for Xid errors, reinstall it), the GPUs' health and their PCIe links before trusting a figure of "
            f"this host{planted}"]


def placement_splits(placement: "list[dict] | None") -> list[str]:
    """What split a launch's ranks over NUMA nodes, one line each: a rank allowed no CPU of its
    GPU's node, and GPUs on different nodes (their traffic crosses the socket link). A rank merely
    allowed CPUs of several nodes is not named: that is every unbound rank of a two-socket box."""
    ranks = placement or []
    lines = [f"local rank {rank['local_rank']} may run only on CPUs {rank['cpus']} (NUMA node "
             f"{', '.join(map(str, rank['cpu_nodes']))}), its GPU hangs off node {rank['gpu_numa_node']}"
             for rank in ranks
             if rank["gpu_numa_node"] is not None and rank["cpu_nodes"] and rank["gpu_numa_node"] not in rank["cpu_nodes"]]
    gpu_nodes = {rank["local_rank"]: rank["gpu_numa_node"] for rank in ranks if rank["gpu_numa_node"] is not None}
    if len(set(gpu_nodes.values())) > 1:
        lines.append("its GPUs hang off different NUMA nodes ("
                     + ", ".join(f"local rank {r}'s on node {node}" for r, node in sorted(gpu_nodes.items()))
                     + "): the traffic between them crosses the socket link")
    return lines


# The consumer box's concerns, by name, each with what a fingerprint must hold for it to be read:
# older fingerprints lack these fields, and `verify` compares a concern only where both sides read it.
MACHINE_CHECKS = {
    "acs_on_gpu_path": (lambda fp: "pcie_path" in fp, acs_on_gpu_path),
    "small_dev_shm": (lambda fp: "dev_shm_total_bytes" in fp, small_dev_shm),
    "numa_split": (lambda fp: "numa" in fp or bool((fp.get("topology") or {}).get("numa_affinity")), numa_split),
    "persistence_off": (lambda fp: any("persistence_mode" in gpu for gpu in fp.get("gpus") or []), persistence_off),
    "iommu_translated": (lambda fp: "iommu" in fp, iommu_translated),
    "p2p_gate": (lambda fp: "gate" in fp, p2p_gate),
}


def machine_concerns(fp: dict) -> dict[str, list[str]]:
    """{name: lines} of the machine checks the fingerprint holds the readings for."""
    return {name: check(fp) for name, (measured, check) in MACHINE_CHECKS.items() if measured(fp)}


def gpu_warnings(fp: dict) -> list[str]:
    """The GPUs' own concerns, one line each, GPU by GPU: health, narrow links, idle NVLinks."""
    return _gpu_warnings(fp, pcie_links(fp), nvlink_links(fp))


def _gpu_warnings(fp: dict, pcie: list, nvlinks: list) -> list[str]:
    lines = [line for gpu in ((fp.get("health") or {}).get("gpus") or []) for line in _health_lines(gpu)]
    return lines + _narrow_links(pcie) + _idle_nvlinks(nvlinks)


def health_warnings(fp: dict) -> list[str]:
    """Every concern of a fingerprint, one line each; empty for a healthy machine."""
    pcie, nvlinks = pcie_links(fp), nvlink_links(fp)
    machine = [line for lines in machine_concerns(fp).values() for line in lines]
    return _gpu_warnings(fp, pcie, nvlinks) + _links_asleep_unmeasured(pcie) + machine
