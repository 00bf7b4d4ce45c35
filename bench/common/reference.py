"""The reference figures of ddpbench, each with its source: the link table (what an all-reduce reaches
on every common interconnect, for the predictor) and, beside it, the expected ranges per GPU model
and link ("is my number normal?"): from public figures, and from this project's own bundles (the
block benchmarks/expected_ranges.py writes, each bundle a source with its id, date and machine).
One place, one sourcing rule, validated against schema/reference.schema.json by
tests/common/test_reference.py.

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
    "nvbandwidth-15": {
        "title": "NVIDIA/nvbandwidth issue #15: nvbandwidth v0.2 on 8x RTX 4090 (driver 545.29.06, CUDA 12.3)",
        "url": "https://github.com/NVIDIA/nvbandwidth/issues/15",
        "says": "host_to_device_memcpy_ce 23.90-26.38 GB/s and device_to_host_memcpy_ce 26.25-27.11 GB/s over the 8 GPUs' PCIe 4.0 x16 links",
    },
    "tinygrad-okm-29": {
        "title": "tinygrad/open-gpu-kernel-modules issue #29: nvbandwidth on 8x RTX 5090",
        "url": "https://github.com/tinygrad/open-gpu-kernel-modules/issues/29",
        "says": "host_to_device_memcpy_ce 56.30-56.41 GB/s and device_to_host_memcpy_ce 57.29-57.35 GB/s over PCIe 5.0 x16",
    },
    "nccl-1639": {
        "title": "NVIDIA/nccl issue #1639: all_reduce_perf -b 1g -e 8g on 8x RTX 5090 (2x Xeon 8480+, ACS off, driver 570.124.04)",
        "url": "https://github.com/NVIDIA/nccl/issues/1639",
        "says": "busbw at most 28 GB/s on 8 GPUs and 35 GB/s on 4; NCCL's author: 'impressed that you can achieve 28GB/s with 8 "
                "GPUs', the CPU and its memory set the pace on PCIe systems",
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
    "ddpbench-h200x1-copy": {
        "title": "ddpbench's copies against nvbandwidth v0.8 on one H200 (PCIe 5.0 x16), 2026-11-23",
        "path": "benchmarks/results/copy_parity_h200x1.md",
        "says": "copy-engine host-to-device 55.32-55.52 GB/s and device-to-host 55.26-55.38 GB/s from 64 MiB to 1 GiB (after the "
                "check's fix; nvbandwidth 53.58-55.29), within 1% of nvbandwidth from 64 MiB up",
    },
    "ddpbench-h200x2-collectives": {
        "title": "ddpbench's collectives beside nccl-tests on 2x H200 (NV18), fp32 all_reduce, 2026-11-22",
        "path": "benchmarks/results/collectives_parity_h200x2.md",
        "says": "busbw over NVLink 265.89-297.71 GB/s (suite) and 264.2-300.3 (nccl-tests) from 64 to 256 MiB, 325.4-345.15 from "
                "1 to 4 GiB; through host memory (NCCL_P2P_DISABLE=1) 26.9-28.16 from 64 MiB to 4 GiB",
    },
    "ddpbench-h200x2-ddp": {
        "title": "ddpbench, the DDP suite on 2x H200 (NV18): gpt2-large, micro-batch 8 x 1024 tokens, bf16 autocast, compiled, "
                 "100 MB buckets (benchmarks/ddp_scaling.py), three sessions of 2026-11-23",
        "path": "benchmarks/results/ddp_h200x2.md",
        "says": "step 93.7-96.1 ms on 1 GPU; 104.8-107.5 ms on 2 GPUs over NVLink with NCCL (P2P); 154.9-158.0 ms with "
                "NCCL_P2P_DISABLE=1 (SHM); scaling 89.2-90.0% over NVLink, 60.0-62.1% through SHM",
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

# "Is my number normal?" The expected ranges per GPU model and link of the figures the
# report judges (bench/suites/judging/normal.py): a copy's GB/s, all_reduce's busbw, a DDP step's seconds.
# A published figure, or the spread of a few, stands for the figures within BAND of it either way:
# two correct measurements of one GPU and link differ by that much (the copy suite against nvbandwidth
# on one H200: 0.99-1.04 from 64 MiB up; the collectives suite against nccl-tests on 2x H200:
# 0.975-1.065 over P2P and SHM), and verify's default tolerance is the same 5%.
BAND = 0.05
# Copies and collectives of this size and up are judged: smaller ones measure latency more than the link.
LARGE_BYTES = 64 * MIB
GPU_4090, GPU_5090, GPU_A6000, GPU_H200 = "NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 5090", "NVIDIA RTX A6000", "NVIDIA H200"
# The DDP recipe of benchmarks/ddp_scaling.py (benchmarks/results/ddp_h200x2.md): a row holds for runs with these params.
GPT2_LARGE_RECIPE = {"model": "gpt2-large", "micro_batch": 8, "seq_len": 1024, "grad_accum": 1, "precision": "bf16",
                  "compile": True, "bucket_cap_mb": 100, "gradient_as_bucket_view": True, "static_graph": False,
                  "optimizer": "adamw", "grad_reduce_dtype": "fp32", "allreduce": "nccl", "weights_dtype": "float32",
                  "activation_checkpointing": False}


def _expected(gpu: str, link: str, figure: str, published: tuple, basis: str, sources: list, says: str, **match) -> dict:
    """A row: the published figures' lowest and highest, widened by BAND each way."""
    low, high = min(published), max(published)
    return {
        "gpu": gpu, "link": link, "figure": figure, "low": round(low * (1 - BAND), 4), "high": round(high * (1 + BAND), 4),
        **match, "basis": "derived" if basis == "cited" else basis, "sources": sources,
        "derivation": f"{says}: {low:g}-{high:g}, widened by {BAND:.0%} either way (the spread of two correct "
                      "measurements of one GPU and link, bench/common/reference.py BAND)",
    }


EXPECTED: list = [
    _expected(GPU_4090, "pcie4-x16", "h2d_copy_gbps", (23.90, 26.38), "cited", ["nvbandwidth-15"],
              "nvbandwidth's host_to_device_memcpy_ce on 8 RTX 4090s", size_bytes_min=LARGE_BYTES),
    _expected(GPU_4090, "pcie4-x16", "d2h_copy_gbps", (26.25, 27.11), "cited", ["nvbandwidth-15"],
              "nvbandwidth's device_to_host_memcpy_ce on 8 RTX 4090s", size_bytes_min=LARGE_BYTES),
    _expected(GPU_5090, "pcie5-x16", "h2d_copy_gbps", (56.30, 56.41), "cited", ["tinygrad-okm-29"],
              "nvbandwidth's host_to_device_memcpy_ce on 8 RTX 5090s", size_bytes_min=LARGE_BYTES),
    _expected(GPU_5090, "pcie5-x16", "d2h_copy_gbps", (57.29, 57.35), "cited", ["tinygrad-okm-29"],
              "nvbandwidth's device_to_host_memcpy_ce on 8 RTX 5090s", size_bytes_min=LARGE_BYTES),
    _expected(GPU_A6000, "pcie4-x16-p2p", "d2d_copy_gbps", (21.80, 26.35), "cited", ["nvbandwidth-50"],
              "nvbandwidth's device_to_device_memcpy_read_ce between 6 RTX A6000s without NVLink, the pairs across "
              "sockets the lowest ('these look good', the answer)", transport="p2p", size_bytes_min=LARGE_BYTES),
    _expected(GPU_4090, "pcie4-x16-p2p", "allreduce_busbw_gbps", (25.9,), "cited", ["tinygrad-okm-36"],
              "all-reduce busbw of 4 RTX 4090s with the P2P-patched driver", transport="p2p", ranks=4,
              size_bytes_min=LARGE_BYTES),
    _expected(GPU_5090, "pcie5-x16", "allreduce_busbw_gbps", (28.0,), "cited", ["nccl-1639"],
              "all_reduce_perf's best busbw on 8 RTX 5090s from 1 to 8 GiB", ranks=8, size_bytes_min=1 << 30),
    _expected(GPU_5090, "pcie5-x16", "allreduce_busbw_gbps", (35.0,), "cited", ["nccl-1639"],
              "all_reduce_perf's best busbw on 4 RTX 5090s from 1 to 8 GiB", ranks=4, size_bytes_min=1 << 30),
    _expected(GPU_H200, "pcie5-x16", "h2d_copy_gbps", (55.32, 55.52), "measured", ["ddpbench-h200x1-copy"],
              "ddpbench's copy-engine host-to-device copies on one H200, 64 MiB to 1 GiB", size_bytes_min=LARGE_BYTES),
    _expected(GPU_H200, "pcie5-x16", "d2h_copy_gbps", (55.26, 55.38), "measured", ["ddpbench-h200x1-copy"],
              "ddpbench's copy-engine device-to-host copies on one H200, 64 MiB to 1 GiB", size_bytes_min=LARGE_BYTES),
    _expected(GPU_H200, "nvlink4", "allreduce_busbw_gbps", (264.2, 265.89, 297.71, 300.3), "measured",
              ["ddpbench-h200x2-collectives", "ddpbench-h200x2-nccl-tests"],
              "fp32 all_reduce busbw on 2x H200 over NV18, 64 to 256 MiB, the suite and nccl-tests",
              transport="nvlink", ranks=2, size_bytes_min=64 * MIB, size_bytes_max=256 * MIB),
    _expected(GPU_H200, "nvlink4", "allreduce_busbw_gbps", (325.4, 326.18, 343.3, 345.15), "measured",
              ["ddpbench-h200x2-collectives", "ddpbench-h200x2-nccl-tests"],
              "fp32 all_reduce busbw on 2x H200 over NV18, 1 to 4 GiB, the suite and nccl-tests",
              transport="nvlink", ranks=2, size_bytes_min=GIB),
    _expected(GPU_H200, "pcie5-x16-host", "allreduce_busbw_gbps", (26.9, 27.0, 27.1, 27.52, 27.65, 27.87, 28.16), "measured",
              ["ddpbench-h200x2-collectives", "ddpbench-h200x2-nccl-tests"],
              "fp32 all_reduce busbw on 2x H200 with NCCL_P2P_DISABLE=1 (SHM), 64 MiB to 4 GiB, the suite and nccl-tests",
              transport="host_memory", ranks=2, size_bytes_min=LARGE_BYTES),
    _expected(GPU_H200, "pcie5-x16", "ddp_step_time_s", (0.0937, 0.0961), "measured", ["ddpbench-h200x2-ddp"],
              "gpt2-large's step on one H200, seconds", ranks=1, config=GPT2_LARGE_RECIPE),
    _expected(GPU_H200, "nvlink4", "ddp_step_time_s", (0.1048, 0.1075), "measured", ["ddpbench-h200x2-ddp"],
              "gpt2-large's step on 2x H200 over NV18 (NCCL, P2P), seconds", transport="nvlink", ranks=2, config=GPT2_LARGE_RECIPE),
    _expected(GPU_H200, "pcie5-x16-host", "ddp_step_time_s", (0.1549, 0.1580), "measured", ["ddpbench-h200x2-ddp"],
              "gpt2-large's step on 2x H200 with NCCL_P2P_DISABLE=1 (SHM), seconds", transport="host_memory", ranks=2,
              config=GPT2_LARGE_RECIPE),
    _expected(GPU_H200, "nvlink4", "ddp_scaling_efficiency_fraction", (0.892, 0.897, 0.900), "measured", ["ddpbench-h200x2-ddp"],
              "gpt2-large's scaling on 2x H200 over NV18 (NCCL, P2P) against one GPU of the same session", transport="nvlink",
              ranks=2, config=GPT2_LARGE_RECIPE),
    _expected(GPU_H200, "pcie5-x16-host", "ddp_scaling_efficiency_fraction", (0.600, 0.621), "measured", ["ddpbench-h200x2-ddp"],
              "gpt2-large's scaling on 2x H200 with NCCL_P2P_DISABLE=1 (SHM) against one GPU of the same session",
              transport="host_memory", ranks=2, config=GPT2_LARGE_RECIPE),
]


# --- This project's own ranges, written by benchmarks/expected_ranges.py from benchmarks/results/bundles/ ---
# Each bundle: (run id, date, machine, plan, file).
MEASURED_BUNDLES = {
    'ddpbench-h100x2-4271cb': ('20261125T183210Z-4271cb', '2026-11-25', '2x NVIDIA H100 80GB HBM3, NVLink NV18',
        'seed001-sharded', 'benchmarks/results/bundles/20261125T183210Z-4271cb.bundle.json.gz'),
    'ddpbench-h100x2-56d161': ('20261125T212254Z-56d161', '2026-11-25', '2x NVIDIA H100 80GB HBM3, NVLink NV18',
        'seed002', 'benchmarks/results/bundles/20261125T212254Z-56d161.bundle.json'),
    'ddpbench-h100x2-a86d8e': ('20261125T213517Z-a86d8e', '2026-11-25', '2x NVIDIA H100 80GB HBM3, NVLink NV18',
        'readings', 'benchmarks/results/bundles/20261125T213517Z-a86d8e.bundle.json'),
    'ddpbench-h100x2-6e20a7': ('20261125T213922Z-6e20a7', '2026-11-25', '2x NVIDIA H100 80GB HBM3, NVLink NV18',
        'quick', 'benchmarks/results/bundles/20261125T213922Z-6e20a7.bundle.json'),
    'ddpbench-h100x2-2c5662': ('20261125T214225Z-2c5662', '2026-11-25', '2x NVIDIA H100 80GB HBM3, NVLink NV18',
        'quick', 'benchmarks/results/bundles/20261125T214225Z-2c5662.bundle.json'),
    'ddpbench-h100x2-593e7a': ('20261125T215632Z-593e7a', '2026-11-25', '2x NVIDIA H100 80GB HBM3, NVLink NV18',
        'seed001-sharded-llama-grad-op', 'benchmarks/results/bundles/20261125T215632Z-593e7a.bundle.json'),
    'ddpbench-h200x4-b6143d': ('20261126T145046Z-b6143d', '2026-11-26', '4x NVIDIA H200, NVLink NV18', 'smoke',
        'benchmarks/results/bundles/20261126T145046Z-b6143d.bundle.json.gz'),
    'ddpbench-h200x2-9ea34b': ('20261126T162558Z-9ea34b', '2026-11-26', '2x NVIDIA H200, NVLink NV18', 'quick',
        'benchmarks/results/bundles/20261126T162558Z-9ea34b.bundle.json.gz'),
    'ddpbench-h200x2-088b2d': ('20261126T162725Z-088b2d', '2026-11-26', '2x NVIDIA H200, NVLink NV18', 'two-nodes',
        'benchmarks/results/bundles/20261126T162725Z-088b2d.bundle.json.gz'),
    'ddpbench-h200x2-ba806a': ('20261126T163106Z-ba806a', '2026-11-26', '2x NVIDIA H200, NVLink NV18', 'two-nodes',
        'benchmarks/results/bundles/20261126T163106Z-ba806a.bundle.json.gz'),
}
# A training row's recipe: a run's params must hold every one of these: model, sharding, micro_batch, seq_len, grad_accum,
# precision, compile, cuda_graphs, weights_dtype, activation_checkpointing, optimizer, grad_reduce_dtype, reduce_dtype,
# bucket_cap_mb, allreduce.
MEASURED_RECIPES = {
    'gpt2 ddp mb16 x1 bf16': {'model': 'gpt2', 'micro_batch': 16, 'seq_len': 1024, 'grad_accum': 1,
        'precision': 'bf16', 'compile': False, 'cuda_graphs': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'gpt2 ddp mb8 x1 bf16': {'model': 'gpt2', 'micro_batch': 8, 'seq_len': 1024, 'grad_accum': 1,
        'precision': 'bf16', 'compile': False, 'cuda_graphs': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'gpt2-large ddp mb16 x1 bf16': {'model': 'gpt2-large', 'micro_batch': 16, 'seq_len': 1024, 'grad_accum': 1,
        'precision': 'bf16', 'compile': False, 'cuda_graphs': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'gpt2-large ddp mb2 x1 bf16': {'model': 'gpt2-large', 'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 1,
        'precision': 'bf16', 'compile': False, 'cuda_graphs': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'gpt2-large ddp mb2 x2 bf16': {'model': 'gpt2-large', 'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 2,
        'precision': 'bf16', 'compile': False, 'cuda_graphs': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'gpt2-large ddp mb2 x4 bf16': {'model': 'gpt2-large', 'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 4,
        'precision': 'bf16', 'compile': False, 'cuda_graphs': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'llama3.2-1b ddp mb2 x1 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'micro_batch': 2,
        'seq_len': 1024, 'grad_accum': 1, 'precision': 'bf16', 'compile': False, 'cuda_graphs': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32',
        'bucket_cap_mb': 100, 'allreduce': 'nccl'},
    'llama3.2-1b ddp mb2 x2 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'micro_batch': 2,
        'seq_len': 1024, 'grad_accum': 2, 'precision': 'bf16', 'compile': False, 'cuda_graphs': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32',
        'bucket_cap_mb': 100, 'allreduce': 'nccl'},
    'llama3.2-1b ddp mb2 x4 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'micro_batch': 2,
        'seq_len': 1024, 'grad_accum': 4, 'precision': 'bf16', 'compile': False, 'cuda_graphs': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32',
        'bucket_cap_mb': 100, 'allreduce': 'nccl'},
    'gpt2-large ddp mb2 x8 bf16': {'model': 'gpt2-large', 'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 8,
        'precision': 'bf16', 'compile': False, 'cuda_graphs': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'llama3.2-1b ddp mb2 x8 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'micro_batch': 2,
        'seq_len': 1024, 'grad_accum': 8, 'precision': 'bf16', 'compile': False, 'cuda_graphs': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'grad_reduce_dtype': 'fp32',
        'bucket_cap_mb': 100, 'allreduce': 'nccl'},
    'sdxl-unet ddp mb2 x4 bf16 checkpointed adafactor bf16 weights': {'model': 'sdxl-unet', 'micro_batch': 2,
        'grad_accum': 4, 'precision': 'bf16', 'compile': False, 'cuda_graphs': False, 'weights_dtype': 'bfloat16',
        'activation_checkpointing': True, 'optimizer': 'adafactor', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'sdxl-unet ddp mb2 x4 bf16 graphed checkpointed adafactor bf16 weights': {'model': 'sdxl-unet', 'micro_batch': 2,
        'grad_accum': 4, 'precision': 'bf16', 'compile': False, 'cuda_graphs': True, 'weights_dtype': 'bfloat16',
        'activation_checkpointing': True, 'optimizer': 'adafactor', 'grad_reduce_dtype': 'fp32', 'bucket_cap_mb': 100,
        'allreduce': 'nccl'},
    'gpt2-large full mb2 x1 bf16': {'model': 'gpt2-large', 'sharding': 'full', 'micro_batch': 2, 'seq_len': 1024,
        'grad_accum': 1, 'precision': 'bf16', 'compile': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'gpt2-large full mb2 x2 bf16': {'model': 'gpt2-large', 'sharding': 'full', 'micro_batch': 2, 'seq_len': 1024,
        'grad_accum': 2, 'precision': 'bf16', 'compile': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'gpt2-large full mb2 x4 bf16': {'model': 'gpt2-large', 'sharding': 'full', 'micro_batch': 2, 'seq_len': 1024,
        'grad_accum': 4, 'precision': 'bf16', 'compile': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'gpt2-large grad_op mb2 x1 bf16': {'model': 'gpt2-large', 'sharding': 'grad_op', 'micro_batch': 2,
        'seq_len': 1024, 'grad_accum': 1, 'precision': 'bf16', 'compile': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'gpt2-large grad_op mb2 x2 bf16': {'model': 'gpt2-large', 'sharding': 'grad_op', 'micro_batch': 2,
        'seq_len': 1024, 'grad_accum': 2, 'precision': 'bf16', 'compile': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'gpt2-large grad_op mb2 x4 bf16': {'model': 'gpt2-large', 'sharding': 'grad_op', 'micro_batch': 2,
        'seq_len': 1024, 'grad_accum': 4, 'precision': 'bf16', 'compile': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'llama3.2-1b full mb2 x1 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'sharding': 'full',
        'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 1, 'precision': 'bf16', 'compile': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'llama3.2-1b full mb2 x2 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'sharding': 'full',
        'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 2, 'precision': 'bf16', 'compile': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'llama3.2-1b full mb2 x4 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'sharding': 'full',
        'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 4, 'precision': 'bf16', 'compile': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'llama3.2-1b grad_op mb2 x1 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'sharding': 'grad_op',
        'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 1, 'precision': 'bf16', 'compile': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'llama3.2-1b grad_op mb2 x2 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'sharding': 'grad_op',
        'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 2, 'precision': 'bf16', 'compile': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'llama3.2-1b grad_op mb2 x4 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'sharding': 'grad_op',
        'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 4, 'precision': 'bf16', 'compile': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'gpt2-large full mb2 x8 bf16': {'model': 'gpt2-large', 'sharding': 'full', 'micro_batch': 2, 'seq_len': 1024,
        'grad_accum': 8, 'precision': 'bf16', 'compile': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'gpt2-large grad_op mb2 x8 bf16': {'model': 'gpt2-large', 'sharding': 'grad_op', 'micro_batch': 2,
        'seq_len': 1024, 'grad_accum': 8, 'precision': 'bf16', 'compile': False, 'weights_dtype': 'float32',
        'activation_checkpointing': False, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'llama3.2-1b full mb2 x8 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'sharding': 'full',
        'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 8, 'precision': 'bf16', 'compile': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
    'llama3.2-1b grad_op mb2 x8 bf16 checkpointed bf16 weights': {'model': 'llama3.2-1b', 'sharding': 'grad_op',
        'micro_batch': 2, 'seq_len': 1024, 'grad_accum': 8, 'precision': 'bf16', 'compile': False,
        'weights_dtype': 'bfloat16', 'activation_checkpointing': True, 'optimizer': 'adamw', 'reduce_dtype': 'fp32'},
}
# gpu, link, figure, low, high, runs, sources, what a run must match (a recipe by its name).
MEASURED_RANGES = (
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'allgather_busbw_gbps', 272.9, 309.6, 2, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'size_bytes_min': 1073741824}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'allgather_busbw_gbps', 201.3, 288.3, 8, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'size_bytes_min': 67108864, 'size_bytes_max': 1073741823}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'allgather_busbw_gbps', 23.87, 26.45, 2, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'size_bytes_min': 1073741824}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'allgather_busbw_gbps', 23.54, 26.36, 8, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'size_bytes_min': 67108864, 'size_bytes_max': 1073741823}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'allgather_busbw_gbps', 2.485, 3.118, 2, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'size_bytes_min': 67108864, 'size_bytes_max': 1073741823}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'allreduce_busbw_gbps', 310.6, 367.8, 8, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-56d161', 'ddpbench-h100x2-6e20a7', 'ddpbench-h100x2-2c5662'), {'ranks': 2, 'transport': 'nvlink',
     'size_bytes_min': 1073741824}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'allreduce_busbw_gbps', 251.0, 340.3, 8, ('ddpbench-h100x2-56d161',
     'ddpbench-h100x2-6e20a7', 'ddpbench-h100x2-2c5662'), {'ranks': 2, 'transport': 'nvlink', 'size_bytes_min': 67108864,
     'size_bytes_max': 1073741823}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'allreduce_busbw_gbps', 24.65, 30.45, 6, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-56d161'), {'ranks': 2, 'transport': 'host_memory', 'size_bytes_min': 1073741824}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'allreduce_busbw_gbps', 18.94, 29.51, 4, ('ddpbench-h100x2-56d161',),
     {'ranks': 2, 'transport': 'host_memory', 'size_bytes_min': 67108864, 'size_bytes_max': 1073741823}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'allreduce_busbw_gbps', 2.522, 3.445, 5, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-56d161'), {'ranks': 2, 'transport': 'net_socket', 'size_bytes_min': 1073741824}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'allreduce_busbw_gbps', 1.995, 3.047, 2, ('ddpbench-h100x2-56d161',),
     {'ranks': 2, 'transport': 'net_socket', 'size_bytes_min': 67108864, 'size_bytes_max': 1073741823}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.9193, 1.017, 1,
     ('ddpbench-h100x2-56d161',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2 ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.8669, 0.9909, 2,
     ('ddpbench-h100x2-6e20a7', 'ddpbench-h100x2-2c5662'), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'gpt2 ddp mb8 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.9025, 0.9977, 1,
     ('ddpbench-h100x2-56d161',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.84, 0.987, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large ddp mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.7989, 1.005, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large ddp mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.9358, 1.036, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large ddp mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.8128, 0.9324, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b ddp mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.7877, 1.029, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b ddp mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.6516, 0.8013, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b ddp mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_scaling_efficiency_fraction', 0.7699, 0.851, 1,
     ('ddpbench-h100x2-56d161',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2 ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_scaling_efficiency_fraction', 0.8229, 0.9097, 1,
     ('ddpbench-h100x2-56d161',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_scaling_efficiency_fraction', 0.5515, 0.6306, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large ddp mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_scaling_efficiency_fraction', 0.7798, 0.9644, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large ddp mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_scaling_efficiency_fraction', 0.9364, 1.108, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large ddp mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_scaling_efficiency_fraction', 0.5893, 0.7752, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b ddp mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_scaling_efficiency_fraction', 0.49, 0.7052, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b ddp mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_scaling_efficiency_fraction', 0.637, 0.8752, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b ddp mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_scaling_efficiency_fraction', 0.2165, 0.3366, 1,
     ('ddpbench-h100x2-56d161',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2 ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_scaling_efficiency_fraction', 0.2095, 0.2565, 1,
     ('ddpbench-h100x2-56d161',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_scaling_efficiency_fraction', 0.07027, 0.07779, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large ddp mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_scaling_efficiency_fraction', 0.1452, 0.1746, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large ddp mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_scaling_efficiency_fraction', 0.2825, 0.3123, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large ddp mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_scaling_efficiency_fraction', 0.1231, 0.1501, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b ddp mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_scaling_efficiency_fraction', 0.1773, 0.2287, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b ddp mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_scaling_efficiency_fraction', 0.3157, 0.3875, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b ddp mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.04988, 0.05514, 1, ('ddpbench-h100x2-56d161',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2 ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.02777, 0.03183, 2, ('ddpbench-h100x2-6e20a7',
     'ddpbench-h100x2-2c5662'), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2 ddp mb8 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.2121, 0.2346, 1, ('ddpbench-h100x2-56d161',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'gpt2-large ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.08592, 0.101, 1, ('ddpbench-h100x2-4271cb',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'gpt2-large ddp mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.1979, 0.2489, 1, ('ddpbench-h100x2-4271cb',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'gpt2-large ddp mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.3955, 0.4387, 1, ('ddpbench-h100x2-4271cb',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'gpt2-large ddp mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.1182, 0.1353, 1, ('ddpbench-h100x2-4271cb',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'llama3.2-1b ddp mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.1998, 0.2609, 1, ('ddpbench-h100x2-4271cb',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'llama3.2-1b ddp mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'ddp_step_time_s', 0.5219, 0.6402, 1, ('ddpbench-h100x2-4271cb',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'llama3.2-1b ddp mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.0482, 0.05336, 2, ('ddpbench-h100x2-56d161',
     'ddpbench-h100x2-a86d8e'), {'ranks': 1, 'recipe': 'gpt2 ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.0262, 0.03372, 2, ('ddpbench-h100x2-6e20a7',
     'ddpbench-h100x2-2c5662'), {'ranks': 1, 'recipe': 'gpt2 ddp mb8 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.2011, 0.2229, 2, ('ddpbench-h100x2-56d161',
     'ddpbench-h100x2-a86d8e'), {'ranks': 1, 'recipe': 'gpt2-large ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.1417, 0.2204, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large ddp mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.3727, 0.4914, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large ddp mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.7536, 0.8621, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large ddp mb2 x8 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.1358, 0.2749, 2, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-593e7a'), {'ranks': 1, 'recipe': 'llama3.2-1b ddp mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.361, 0.6415, 2, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-593e7a'), {'ranks': 1, 'recipe': 'llama3.2-1b ddp mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 0.6916, 1.017, 2, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-593e7a'), {'ranks': 1, 'recipe': 'llama3.2-1b ddp mb2 x8 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 1.797, 1.987, 1, ('ddpbench-h100x2-a86d8e',), {'ranks': 1,
     'recipe': 'sdxl-unet ddp mb2 x4 bf16 checkpointed adafactor bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'ddp_step_time_s', 1.062, 1.175, 1, ('ddpbench-h100x2-a86d8e',), {'ranks': 1,
     'recipe': 'sdxl-unet ddp mb2 x4 bf16 graphed checkpointed adafactor bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_step_time_s', 0.05956, 0.06584, 1, ('ddpbench-h100x2-56d161',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2 ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_step_time_s', 0.2326, 0.2572, 1, ('ddpbench-h100x2-56d161',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_step_time_s', 0.1341, 0.1538, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large ddp mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_step_time_s', 0.2059, 0.255, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large ddp mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_step_time_s', 0.3705, 0.4384, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large ddp mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_step_time_s', 0.1422, 0.1871, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b ddp mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_step_time_s', 0.2914, 0.4193, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b ddp mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'ddp_step_time_s', 0.4777, 0.6565, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b ddp mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_step_time_s', 0.1505, 0.2347, 1, ('ddpbench-h100x2-56d161',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2 ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_step_time_s', 0.8274, 1.013, 1, ('ddpbench-h100x2-56d161',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large ddp mb16 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_step_time_s', 1.087, 1.207, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large ddp mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_step_time_s', 1.136, 1.369, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large ddp mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_step_time_s', 1.311, 1.45, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large ddp mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_step_time_s', 0.735, 0.8954, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b ddp mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_step_time_s', 0.8966, 1.159, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b ddp mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'ddp_step_time_s', 1.079, 1.325, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b ddp mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.2722, 0.4908, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large full mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.4371, 0.5875, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large full mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.5176, 0.5999, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large full mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.3114, 0.6453, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large grad_op mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.6155, 0.7302, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large grad_op mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.5963, 0.6854, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large grad_op mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.5253, 0.6129, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b full mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.4763, 0.5884, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b full mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.4769, 0.6192, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b full mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.3676, 0.7111, 2,
     ('ddpbench-h100x2-4271cb', 'ddpbench-h100x2-593e7a'), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b grad_op mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.5063, 0.923, 2,
     ('ddpbench-h100x2-4271cb', 'ddpbench-h100x2-593e7a'), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b grad_op mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_scaling_efficiency_fraction', 0.5242, 0.862, 2,
     ('ddpbench-h100x2-4271cb', 'ddpbench-h100x2-593e7a'), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b grad_op mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.2986, 0.4442, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large full mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.4241, 0.5638, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large full mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.4153, 0.6063, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large full mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.2833, 0.546, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large grad_op mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.507, 0.6669, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large grad_op mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.5073, 0.6208, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large grad_op mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.4955, 0.5478, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b full mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.5095, 0.5906, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b full mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.5484, 0.6473, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b full mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.599, 0.6641, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b grad_op mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.4768, 0.6047, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b grad_op mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_scaling_efficiency_fraction', 0.5553, 0.7082, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory',
     'recipe': 'llama3.2-1b grad_op mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.06904, 0.0984, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large full mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.1431, 0.1671, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large full mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.1592, 0.1887, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large full mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.09694, 0.1263, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large grad_op mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.1735, 0.2099, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large grad_op mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.198, 0.2507, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large grad_op mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.05572, 0.08139, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b full mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.09015, 0.09965, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b full mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.1032, 0.1245, 1,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b full mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.06186, 0.07378, 1,
     ('ddpbench-h100x2-593e7a',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b grad_op mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.1426, 0.1578, 1,
     ('ddpbench-h100x2-593e7a',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b grad_op mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_scaling_efficiency_fraction', 0.1579, 0.1746, 1,
     ('ddpbench-h100x2-593e7a',), {'ranks': 2, 'transport': 'net_socket',
     'recipe': 'llama3.2-1b grad_op mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.1727, 0.3115, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large full mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.3384, 0.4549, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large full mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.6826, 0.793, 1, ('ddpbench-h100x2-4271cb',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'gpt2-large full mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.1314, 0.2724, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large grad_op mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.2722, 0.3222, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large grad_op mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.5989, 0.6884, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2-large grad_op mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.1799, 0.2099, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'llama3.2-1b full mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.3492, 0.4304, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'llama3.2-1b full mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.6753, 0.8768, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'llama3.2-1b full mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.1103, 0.2023, 2, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-593e7a'), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b grad_op mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.2422, 0.4059, 2, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-593e7a'), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b grad_op mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'fsdp_step_time_s', 0.4576, 0.7978, 2, ('ddpbench-h100x2-4271cb',
     'ddpbench-h100x2-593e7a'), {'ranks': 2, 'transport': 'nvlink',
     'recipe': 'llama3.2-1b grad_op mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.2857, 0.4358, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large full mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.7045, 1.107, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large full mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 1.252, 1.482, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large full mb2 x8 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.1729, 0.2806, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large grad_op mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.3689, 0.5192, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large grad_op mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.763, 0.9731, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'gpt2-large grad_op mb2 x8 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.2375, 0.3817, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'llama3.2-1b full mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.5751, 0.6751, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'llama3.2-1b full mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 1.052, 1.339, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'llama3.2-1b full mb2 x8 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.2759, 0.3773, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'llama3.2-1b grad_op mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 0.5329, 0.6669, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'llama3.2-1b grad_op mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16', 'fsdp_step_time_s', 1.017, 1.284, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 1, 'recipe': 'llama3.2-1b grad_op mb2 x8 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.1909, 0.284, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large full mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.3526, 0.4688, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large full mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.6771, 0.9883, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large full mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.1553, 0.2994, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large grad_op mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.2981, 0.3922, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large grad_op mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.6612, 0.8092, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'gpt2-large grad_op mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.2007, 0.222, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b full mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.3479, 0.4033, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b full mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.646, 0.7625, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b full mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.1656, 0.1841, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b grad_op mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.3398, 0.4309, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b grad_op mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'fsdp_step_time_s', 0.5904, 0.753, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'host_memory', 'recipe': 'llama3.2-1b grad_op mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 0.8613, 1.229, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large full mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 1.187, 1.389, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large full mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 2.176, 2.578, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large full mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 0.6716, 0.8748, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large grad_op mb2 x1 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 0.9472, 1.146, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large grad_op mb2 x2 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 1.637, 2.073, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'gpt2-large grad_op mb2 x4 bf16'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 1.354, 1.979, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b full mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 2.057, 2.274, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b full mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 3.361, 4.052, 1, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b full mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 1.007, 1.199, 1, ('ddpbench-h100x2-593e7a',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b grad_op mb2 x1 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 1.414, 1.564, 1, ('ddpbench-h100x2-593e7a',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b grad_op mb2 x2 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'fsdp_step_time_s', 2.253, 2.492, 1, ('ddpbench-h100x2-593e7a',),
     {'ranks': 2, 'transport': 'net_socket', 'recipe': 'llama3.2-1b grad_op mb2 x4 bf16 checkpointed bf16 weights'}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'reducescatter_busbw_gbps', 250.5, 284.5, 2, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'size_bytes_min': 1073741824}),
    ('NVIDIA H100 80GB HBM3', 'nvlink4', 'reducescatter_busbw_gbps', 186.0, 264.4, 8, ('ddpbench-h100x2-4271cb',),
     {'ranks': 2, 'transport': 'nvlink', 'size_bytes_min': 67108864, 'size_bytes_max': 1073741823}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'reducescatter_busbw_gbps', 23.75, 26.56, 2,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'size_bytes_min': 1073741824}),
    ('NVIDIA H100 80GB HBM3', 'pcie5-x16-host', 'reducescatter_busbw_gbps', 23.45, 26.58, 8,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'host_memory', 'size_bytes_min': 67108864,
     'size_bytes_max': 1073741823}),
    ('NVIDIA H100 80GB HBM3', 'socket-loopback', 'reducescatter_busbw_gbps', 2.812, 3.178, 2,
     ('ddpbench-h100x2-4271cb',), {'ranks': 2, 'transport': 'net_socket', 'size_bytes_min': 67108864,
     'size_bytes_max': 1073741823}),
    ('NVIDIA H200', 'nvlink4', 'allreduce_busbw_gbps', 311.7, 344.6, 1, ('ddpbench-h200x2-9ea34b',), {'ranks': 2,
     'transport': 'nvlink', 'size_bytes_min': 1073741824}),
    ('NVIDIA H200', 'nvlink4', 'allreduce_busbw_gbps', 253.4, 314.0, 2, ('ddpbench-h200x2-9ea34b',), {'ranks': 2,
     'transport': 'nvlink', 'size_bytes_min': 67108864, 'size_bytes_max': 1073741823}),
    ('NVIDIA H200', 'nvlink4', 'allreduce_busbw_gbps', 294.5, 325.6, 1, ('ddpbench-h200x4-b6143d',), {'ranks': 4,
     'transport': 'nvlink', 'size_bytes_min': 67108864, 'size_bytes_max': 1073741823}),
    ('NVIDIA H200', 'nvlink4', 'ddp_scaling_efficiency_fraction', 0.8924, 0.9864, 1, ('ddpbench-h200x2-9ea34b',),
     {'ranks': 2, 'transport': 'nvlink', 'recipe': 'gpt2 ddp mb8 x1 bf16'}),
    ('NVIDIA H200', 'nvlink4', 'ddp_step_time_s', 0.02468, 0.02729, 1, ('ddpbench-h200x2-9ea34b',), {'ranks': 2,
     'transport': 'nvlink', 'recipe': 'gpt2 ddp mb8 x1 bf16'}),
    ('NVIDIA H200', 'pcie5-x16', 'ddp_step_time_s', 0.02319, 0.02564, 1, ('ddpbench-h200x2-9ea34b',), {'ranks': 1,
     'recipe': 'gpt2 ddp mb8 x1 bf16'}),
)
# --- end of the block benchmarks/expected_ranges.py writes ---


def _bundle_source(run_id: str, date: str, machine: str, plan: str, path: str) -> dict:
    return {"title": f"ddpbench bundle {run_id}, plan {plan}", "path": path, "bundle": run_id, "date": date, "machine": machine,
            "says": "its runs' medians and p5-p95 of busbw, DDP and FSDP step time and scaling efficiency, which this "
                    "project's measured ranges take (benchmarks/expected_ranges.py)"}


def _measured(gpu: str, link: str, figure: str, low: float, high: float, runs: int, sources: tuple, match: dict) -> dict:
    """A row of this project's bundles: the runs' medians, each widened, lowest to highest."""
    found = {key: value for key, value in match.items() if key != "recipe"}
    if "recipe" in match:
        found["config"] = MEASURED_RECIPES[match["recipe"]]
    return {"gpu": gpu, "link": link, "figure": figure, "low": low, "high": high, **found, "basis": "measured",
            "sources": list(sources),
            "derivation": f"{runs} run(s) of this project's bundles: from the lowest median to the highest, each widened by "
                          f"{BAND:.0%} either way (bench/common/reference.py BAND) or to its run's own p5-p95 where wider"}


SOURCES.update({name: _bundle_source(*entry) for name, entry in MEASURED_BUNDLES.items()})
EXPECTED += [_measured(*row) for row in MEASURED_RANGES]


def document() -> dict:
    """The whole reference as one JSON document (what schema/reference.schema.json validates)."""
    return {"sources": SOURCES, "links": LINKS, "expected": EXPECTED}
