"""The link table of ddpbench, each row with its sources: what an all-reduce reaches on every common
interconnect, for the predictor (bench/common/allreduce.py, `ddpbench predict`). Validated against
schema/reference.schema.json by tests/common/test_reference.py. Its SOURCES are also what the expected
ranges (each suite's expected.json, bench/judging/ranges.py) cite beside their own.

The sourcing rule: every row names its sources (keys of SOURCES) and says how it was got:
- measured: this project measured it; the source is a file of this repository (`path`);
- cited: a public figure of that exact link, used as published;
- derived: computed from cited figures, `derivation` says how. A link rate (PCI-SIG, an NVIDIA
  datasheet, IEEE, IBTA) times an efficiency factor measured on a link of the same kind:
  `rate_gbps` x `factor` = `busbw_gbps`, both named in the row.

A link row gives what NCCL's all-reduce reaches on it between `ranks` GPUs: the bus bandwidth of
large messages (`busbw_gbps`, nccl-tests' busbw: algbw x 2(n-1)/n, GB/s = 1e9 bytes/s), the time
of a small one (`latency_us`), and where measured, the whole curve (`curve`: [size_bytes,
busbw_gbps] pairs, which win over the two numbers). Plain data: the agent ships it, the controller
reads it, and nothing here imports anything outside the standard library and bench/common.
"""

from __future__ import annotations

from bench.common.links import PCIE_LANE_GBPS

SOURCES = {
    "ddpbench-h200x2-nccl-tests": {
        "title": "ddpbench, 2x H200 (NV18, PCIe 5.0 x16), nccl-tests 2.19.6 all_reduce_perf -g 2, fp32, out-of-place, "
                 "NCCL 2.28.9 (2026-11-22), with the suite's own sweep beside it",
        "path": "benchmarks/results/collectives_parity_h200x2.md",
        "says": "busbw 67.5 (1 MiB) to 343.3 GB/s (4 GiB) over NVLink; 16.4 to 27.0 GB/s with NCCL_P2P_DISABLE=1 (SHM); "
                "2.35 to 3.78 GB/s over NET/Socket (P2P and SHM off); the same table in DESIGN.md's reference facts",
    },
    "pci-sig": {
        "title": "PCI-SIG, PCI Express Base Specification revisions 3.0, 4.0 and 5.0",
        "url": "https://pcisig.com/specifications",
        "says": "8, 16 and 32 GT/s per lane with 128b/130b encoding: 0.985, 1.969 and 3.938 GB/s per lane and direction "
                "(bench/common/links.py PCIE_LANE_GBPS)",
    },
    "tinygrad-okm-36": {
        "title": "tinygrad/open-gpu-kernel-modules issue #36: 4x RTX 4090 with the P2P-patched driver",
        "url": "https://github.com/tinygrad/open-gpu-kernel-modules/issues/36",
        "says": "all-reduce busbw about 25.9 GB/s on PCIe 4.0 x16 with P2P",
    },
    "nvbandwidth-50": {
        "title": "NVIDIA/nvbandwidth issue #50: RTX A6000, PCIe 4.0, no NVLink",
        "url": "https://github.com/NVIDIA/nvbandwidth/issues/50",
        "says": "device-to-device copy-engine copy 26.3 GB/s over PCIe 4.0 x16 (0.835 of the link rate, beside the 0.822 of issue 36)",
    },
    "nccl-topo-h": {
        "title": "NVIDIA/nccl src/graph/topo.h: the per-link bandwidths of NCCL's topology model",
        "url": "https://github.com/NVIDIA/nccl/blob/master/src/graph/topo.h",
        "says": "SM80_NVLINK_BW 20.0, SM86_NVLINK_BW 12.0, SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1 GB/s per NVLink",
    },
    "nccl-tests-149": {
        "title": "NVIDIA/nccl-tests issue #149: expected bandwidth, A100 over NVLink (sjeaugey's answer)",
        "url": "https://github.com/NVIDIA/nccl-tests/issues/149",
        "says": "12 NVLinks of 25 GB/s line rate per direction, about 20 GB/s effective each; all-reduce busbw about 230 GB/s on A100",
    },
    "nccl-tests-212": {
        "title": "NVIDIA/nccl-tests issue #212: H100 all-reduce (sjeaugey's answer)",
        "url": "https://github.com/NVIDIA/nccl-tests/issues/212",
        "says": "450 GB/s NVLink line rate per direction; with about 20% protocol overhead NCCL gets about 370 GB/s",
    },
    "nvidia-ga102-whitepaper": {
        "title": "NVIDIA Ampere GA102 GPU Architecture whitepaper (RTX 3090), third-generation NVLink",
        "url": "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf",
        "says": "four x4 links of 14.0625 GB/s per direction: 56.25 GB/s per direction, 112.5 GB/s total between two GPUs",
    },
    "nvidia-nvlink": {
        "title": "NVIDIA, NVLink and NVLink Switch (per-GPU NVLink bandwidth by generation)",
        "url": "https://www.nvidia.com/en-us/data-center/nvlink/",
        "says": "third generation (A100) 600 GB/s, fourth (H100/H200) 900 GB/s, fifth (B200) 1,800 GB/s per GPU, both directions summed",
    },
    "nccl-1807": {
        "title": "NVIDIA/nccl issue #1807: 8x B200, NCCL 2.27",
        "url": "https://github.com/NVIDIA/nccl/issues/1807",
        "says": "NCCL's log gives maxBw 721.8 (18 x SM100_NVLINK_BW); all_reduce_perf reaches 830+ GB/s busbw on 8 GPUs (NVLink SHARP)",
    },
    "nccl-1576": {
        "title": "NVIDIA/nccl issue #1576, quoting AddyLaddy in #812",
        "url": "https://github.com/NVIDIA/nccl/issues/1576",
        "says": "a DGX A100 with 8x 200 Gb/s InfiniBand (HDR) measures 192 GB/s all-reduce busbw: 24 GB/s per NIC",
    },
    "nccl-tests-267": {
        "title": "NVIDIA/nccl-tests issue #267 (AddyLaddy's answer)",
        "url": "https://github.com/NVIDIA/nccl-tests/issues/267",
        "says": "ConnectX-7 NICs at NDR rate (400 Gb/s) should achieve up to 48-49 GB/s per NIC",
    },
    "nccl-tests-150": {
        "title": "NVIDIA/nccl-tests issue #150: all_reduce_perf on 2 nodes, one A100 each, InfiniBand HDR",
        "url": "https://github.com/NVIDIA/nccl-tests/issues/150",
        "says": "8-byte all-reduce in 19.0-19.9 us between the two nodes",
    },
    "nvidia-connectx": {
        "title": "NVIDIA ConnectX-6 (HDR, 200 Gb/s) and ConnectX-7 (NDR, 400 Gb/s) InfiniBand adapters",
        "url": "https://www.nvidia.com/en-us/networking/infiniband-adapters/",
        "says": "HDR 200 Gb/s (25 GB/s) and NDR 400 Gb/s (50 GB/s) per port and direction",
    },
    "ieee-802.3": {
        "title": "IEEE 802.3 Ethernet: 10GBASE (802.3ae), 25GBASE (802.3by), 100GBASE (802.3ba/bj)",
        "url": "https://standards.ieee.org/ieee/802.3/10422/",
        "says": "10, 25 and 100 Gb/s: 1.25, 3.125 and 12.5 GB/s per direction",
    },
    "seed-002": {
        "title": "'The Impact of GPU Networking (Part 1)' (Tomas, 2025-03-14), its communication benchmark",
        "url": "https://tomaslaz.github.io/scale-ops/net_1",
        "says": "an all-reduce of 700M bf16 parameters between 2 A100 nodes over 25GbE with NCCL: 0.88 s, 'transfer speed' "
                "3.01 GB/s = 2 x bytes / time, so busbw 1.50 GB/s; PCIe 4.0 within a node: 26.90, busbw 13.45 GB/s",
    },
    "nccl-450": {
        "title": "NVIDIA/nccl issue #450: all-reduce over a 100 Gb/s TCP network (4 nodes of 8 V100)",
        "url": "https://github.com/NVIDIA/nccl/issues/450",
        "says": "the best all-reduce busbw reached over NCCL's sockets is 4-6 GB/s, less than half the line rate",
    },
    "nccl-tests-44": {
        "title": "NVIDIA/nccl-tests issue #44: 2x RTX 2080 Ti with an NVLink bridge",
        "url": "https://github.com/NVIDIA/nccl-tests/issues/44",
        "says": "a 32 KiB all-reduce in 11.9-13.4 us, of which about 1.6 us is the transfer at the bridge's 20 GB/s",
    },
    "tinygrad-okm-17": {
        "title": "tinygrad/open-gpu-kernel-modules issue #17: 2x RTX 4090, P2P disabled (NCCL through host memory)",
        "url": "https://github.com/tinygrad/open-gpu-kernel-modules/issues/17",
        "says": "8-byte collectives between the two GPUs in 11.5-11.9 us",
    },
    "tinygrad-okm-44": {
        "title": "tinygrad/open-gpu-kernel-modules issue #44: 2x RTX 4090 on the chipset's lanes, p2pBandwidthLatencyTest",
        "url": "https://github.com/tinygrad/open-gpu-kernel-modules/issues/44",
        "says": "peer copies 6.34 GB/s one way with P2P off, 6.60 with it on: a chipset slot caps what any link setting gets",
    },
    "club-3090-1507": {
        "title": "club-3090 issue #1507: 2x RTX 3090 at x8/x8, a peer copy with the links asleep and awake",
        "url": "https://github.com/club-3090/club-3090/issues/1507",
        "says": "3.2 GB/s with a link asleep, 13.1 GB/s once both GPUs were awake",
    },
    "nccl-2.4-trees": {
        "title": "NVIDIA Developer Blog, 'Massively Scale Your Deep Learning Training with NCCL 2.4' (double binary trees)",
        "url": "https://developer.nvidia.com/blog/massively-scale-deep-learning-training-nccl-2-4/",
        "says": "a ring all-reduce's latency grows linearly with the ranks, a double binary tree's logarithmically, at full bandwidth",
    },
}

# Efficiency factors: what an all-reduce reaches on a link, as a share of its line rate per direction,
# each measured on one link of the kind and applied to its siblings.
P2P_FACTOR = round(25.9 / (PCIE_LANE_GBPS[4] * 16), 4)  # tinygrad #36: 25.9 GB/s on PCIe 4.0 x16 with P2P
HOST_MEMORY_FACTOR = round(27.0 / (PCIE_LANE_GBPS[5] * 16), 4)  # this project: 27.0 GB/s at 1 GiB, PCIe 5.0 x16, SHM
NVLINK_MODEL_FACTOR = round(343.3 / (18 * 20.6), 4)  # this project's NV18 busbw at 4 GiB / NCCL's model of 18 SM90 links
ETHERNET_FACTOR = round(1.50 / 3.125, 4)  # 'The Impact of GPU Networking': busbw 1.50 GB/s over 25GbE

P2P_LATENCY_US = 10.0  # nccl-tests #44: 32 KiB in 11.9-13.4 us, less 1.6 us of transfer
HOST_MEMORY_LATENCY_US = 12.0  # tinygrad #17: 8 bytes in 11.5-11.9 us through host memory
IB_LATENCY_US = 20.0  # nccl-tests #150: 8 bytes in 19.0-19.9 us between two HDR nodes
# This project's NET/Socket sweep, 1 MiB in 446 us and 4 MiB in 1571 us: a line through the two
# points leaves 71 us at size 0; NCCL's socket transport costs that on any wire.
SOCKET_LATENCY_US = 70.0

MIB, GIB = 1 << 20, 1 << 30
H200_SIZES = (MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, GIB, 4 * GIB)


def _curve(busbw: tuple) -> list:
    return [[size, gbps] for size, gbps in zip(H200_SIZES, busbw)]


def _pcie_rows() -> list:
    """PCIe 3.0/4.0/5.0 at x1/x4/x8/x16, GPU to GPU (P2P) and through host memory, from the PCI-SIG rate."""
    rows = []
    for gen in (3, 4, 5):
        for width in (1, 4, 8, 16):
            rate = round(PCIE_LANE_GBPS[gen] * width, 3)
            rows.append({
                "name": f"pcie{gen}-x{width}-p2p", "title": f"PCIe {gen}.0 x{width}, GPU to GPU (P2P)",
                "level": "intra_node", "transport": "p2p", "ranks": 2,
                "busbw_gbps": round(rate * P2P_FACTOR, 3), "latency_us": P2P_LATENCY_US,
                "basis": "derived", "rate_gbps": rate, "factor": P2P_FACTOR,
                "sources": ["pci-sig", "tinygrad-okm-36", "nvbandwidth-50", "nccl-tests-44"],
                "derivation": f"PCI-SIG's {PCIE_LANE_GBPS[gen]} GB/s per lane x {width} lanes x {P2P_FACTOR} (25.9 GB/s "
                              "all-reduce busbw of RTX 4090s with P2P on PCIe 4.0 x16, tinygrad #36; nvbandwidth #50's "
                              f"copies reach 0.835); latency {P2P_LATENCY_US:g} us from nccl-tests #44",
            })
            if (gen, width) == (5, 16):
                continue  # measured: the row below
            rows.append({
                "name": f"pcie{gen}-x{width}-host", "title": f"PCIe {gen}.0 x{width}, through host memory (P2P off)",
                "level": "intra_node", "transport": "host_memory", "ranks": 2,
                "busbw_gbps": round(rate * HOST_MEMORY_FACTOR, 3), "latency_us": HOST_MEMORY_LATENCY_US,
                "basis": "derived", "rate_gbps": rate, "factor": HOST_MEMORY_FACTOR,
                "sources": ["pci-sig", "ddpbench-h200x2-nccl-tests", "seed-002", "tinygrad-okm-17"],
                "derivation": f"PCI-SIG's {PCIE_LANE_GBPS[gen]} GB/s per lane x {width} lanes x {HOST_MEMORY_FACTOR} (this "
                              "project's 27.0 GB/s busbw at 1 GiB with NCCL_P2P_DISABLE=1 on PCIe 5.0 x16; the GPU "
                              "networking post's 13.45 GB/s on A100s over PCIe 4.0 x16 is the same share); latency "
                              f"{HOST_MEMORY_LATENCY_US:g} us from tinygrad #17. Host memory and the CPU set this path's pace "
                              "as much as the link: a host with slower memory gets less",
            })
    rows.append({
        "name": "pcie5-x16-host", "title": "PCIe 5.0 x16, through host memory (P2P off), measured on 2x H200",
        "level": "intra_node", "transport": "host_memory", "ranks": 2,
        "busbw_gbps": 27.0, "latency_us": HOST_MEMORY_LATENCY_US, "rate_gbps": round(PCIE_LANE_GBPS[5] * 16, 3),
        "curve": _curve((16.4, 24.0, 26.5, 27.1, 26.9, 27.0, 27.0)),
        "basis": "measured", "sources": ["ddpbench-h200x2-nccl-tests", "tinygrad-okm-17"],
        "derivation": f"the curve measured; latency {HOST_MEMORY_LATENCY_US:g} us from tinygrad #17 (the sweep starts at 1 MiB)",
    })
    return rows


def _nvlink_rows() -> list:
    return [
        {
            "name": "rtx3090-nvlink-bridge", "title": "RTX 3090 NVLink bridge (NVLink 3, NV4: 4 links)",
            "level": "intra_node", "transport": "nvlink", "ranks": 2,
            "busbw_gbps": round(4 * 12.0 * NVLINK_MODEL_FACTOR, 3), "latency_us": P2P_LATENCY_US,
            "basis": "derived", "rate_gbps": 56.25, "factor": round(4 * 12.0 * NVLINK_MODEL_FACTOR / 56.25, 4),
            "sources": ["nvidia-ga102-whitepaper", "nccl-topo-h", "ddpbench-h200x2-nccl-tests", "nccl-tests-44"],
            "derivation": f"4 links x NCCL's 12.0 GB/s per GA102 (SM86) link x {NVLINK_MODEL_FACTOR} (what this project's NV18 "
                          "reached at 4 GiB, 343.3 GB/s, of NCCL's 18 x 20.6 GB/s); the line rate is 4 x 14.0625 = 56.25 GB/s "
                          "per direction (GA102 whitepaper). Nobody has published this link's all-reduce busbw",
        },
        {
            "name": "nvlink3", "title": "NVLink 3 (A100 SXM, NV12: 12 links)",
            "level": "intra_node", "transport": "nvlink", "ranks": 2,
            "busbw_gbps": 230.0, "latency_us": P2P_LATENCY_US, "rate_gbps": 300.0,
            "basis": "cited", "sources": ["nccl-tests-149", "nvidia-nvlink", "nccl-tests-44"],
            "derivation": f"busbw as NCCL's author gives it for A100 (nccl-tests #149); latency {P2P_LATENCY_US:g} us from nccl-tests #44",
        },
        {
            "name": "nvlink4", "title": "NVLink 4 (H100/H200 SXM, NV18: 18 links), measured on 2x H200",
            "level": "intra_node", "transport": "nvlink", "ranks": 2,
            "busbw_gbps": 343.3, "latency_us": P2P_LATENCY_US, "rate_gbps": 450.0,
            "curve": _curve((67.5, 119.1, 205.0, 264.2, 300.3, 325.4, 343.3)),
            "basis": "measured", "sources": ["ddpbench-h200x2-nccl-tests", "nccl-tests-212", "nccl-tests-44"],
            "derivation": f"the curve measured (NVLink SHARP off: 2 GPUs); latency {P2P_LATENCY_US:g} us from nccl-tests #44",
        },
        {
            "name": "nvlink5", "title": "NVLink 5 (B200, NV18: 18 links)",
            "level": "intra_node", "transport": "nvlink", "ranks": 2,
            "busbw_gbps": round(18 * 40.1 * NVLINK_MODEL_FACTOR, 3), "latency_us": P2P_LATENCY_US,
            "basis": "derived", "rate_gbps": 900.0, "factor": round(18 * 40.1 * NVLINK_MODEL_FACTOR / 900.0, 4),
            "sources": ["nccl-topo-h", "nccl-1807", "nvidia-nvlink", "ddpbench-h200x2-nccl-tests", "nccl-tests-44"],
            "derivation": f"18 links x NCCL's 40.1 GB/s per B200 (SM100) link (maxBw 721.8 in nccl #1807's log) x "
                          f"{NVLINK_MODEL_FACTOR} (NV18 measured / modelled, as for the RTX 3090 bridge)",
        },
    ]


def _network_rows() -> list:
    return [
        {
            "name": "ib-hdr", "title": "InfiniBand HDR (200 Gb/s), one NIC per node",
            "level": "inter_node", "transport": "net_ib", "ranks": 2,
            "busbw_gbps": 24.0, "latency_us": IB_LATENCY_US, "rate_gbps": 25.0,
            "basis": "cited", "sources": ["nccl-1576", "nvidia-connectx", "nccl-tests-150"],
            "derivation": "192 GB/s over 8 HDR NICs (nccl #1576): 24 GB/s a NIC; latency from nccl-tests #150",
        },
        {
            "name": "ib-ndr", "title": "InfiniBand NDR (400 Gb/s), one NIC per node",
            "level": "inter_node", "transport": "net_ib", "ranks": 2,
            "busbw_gbps": 48.0, "latency_us": IB_LATENCY_US, "rate_gbps": 50.0,
            "basis": "cited", "sources": ["nccl-tests-267", "nvidia-connectx", "nccl-tests-150"],
            "derivation": "48-49 GB/s per NDR NIC (nccl-tests #267); latency HDR's (nccl-tests #150): NDR's own 2-node figure is unpublished",
        },
        {
            "name": "eth-10g", "title": "Ethernet 10 GbE, NCCL over TCP sockets",
            "level": "inter_node", "transport": "net_socket", "ranks": 2,
            "busbw_gbps": round(1.25 * ETHERNET_FACTOR, 3), "latency_us": SOCKET_LATENCY_US,
            "basis": "derived", "rate_gbps": 1.25, "factor": ETHERNET_FACTOR,
            "sources": ["ieee-802.3", "seed-002", "ddpbench-h200x2-nccl-tests"],
            "derivation": f"1.25 GB/s x {ETHERNET_FACTOR} (the GPU networking post's 1.50 GB/s busbw over 25GbE); latency {SOCKET_LATENCY_US:g} us "
                          "from this project's NET/Socket sweep (1 and 4 MiB)",
        },
        {
            "name": "eth-25g", "title": "Ethernet 25 GbE, NCCL over TCP sockets",
            "level": "inter_node", "transport": "net_socket", "ranks": 2,
            "busbw_gbps": 1.50, "latency_us": SOCKET_LATENCY_US, "rate_gbps": 3.125,
            "basis": "cited", "sources": ["seed-002", "ieee-802.3", "ddpbench-h200x2-nccl-tests"],
            "derivation": f"the GPU networking post's measurement (2 x bytes / time = 3.01 GB/s: busbw 1.50); latency {SOCKET_LATENCY_US:g} us "
                          "from this project's NET/Socket sweep",
        },
        {
            "name": "eth-100g", "title": "Ethernet 100 GbE, NCCL over TCP sockets",
            "level": "inter_node", "transport": "net_socket", "ranks": 2,
            "busbw_gbps": 5.0, "latency_us": SOCKET_LATENCY_US, "rate_gbps": 12.5,
            "basis": "cited", "sources": ["nccl-450", "ieee-802.3", "ddpbench-h200x2-nccl-tests"],
            "derivation": f"the middle of nccl #450's 4-6 GB/s; latency {SOCKET_LATENCY_US:g} us from this project's NET/Socket sweep",
        },
        {
            "name": "socket-loopback", "title": "NCCL over TCP sockets within one host (the socket preset), measured on 2x H200",
            "level": "intra_node", "transport": "net_socket", "ranks": 2,
            "busbw_gbps": 3.3, "latency_us": SOCKET_LATENCY_US,
            "curve": _curve((2.35, 2.67, 3.28, 3.78, 3.62, 3.33, 3.01)),
            "basis": "measured", "sources": ["ddpbench-h200x2-nccl-tests"],
            "derivation": f"the curve measured; latency {SOCKET_LATENCY_US:g} us from its 1 and 4 MiB points",
        },
    ]


LINKS = _pcie_rows() + _nvlink_rows() + _network_rows()
# The NVLink row of a GPU model, by a part of its name as NVML gives it.
NVLINK_ROWS = (("RTX 3090", "rtx3090-nvlink-bridge"), ("A100", "nvlink3"), ("H100", "nvlink4"), ("H200", "nvlink4"),
               ("B200", "nvlink5"))


def nvlink_row(gpu: str) -> "str | None":
    """The link table's NVLink row of a GPU model, where the table has one."""
    return next((name for needle, name in NVLINK_ROWS if needle in gpu.upper()), None)


def document() -> dict:
    """The link table and its sources as one JSON document (what schema/reference.schema.json validates)."""
    return {"sources": SOURCES, "links": LINKS}
