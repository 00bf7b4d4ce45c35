"""Fingerprint: parsers against real nvidia-smi / NVML captures, the live collect(), the schema."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from jsonschema import Draft202012Validator

from bench.agent.fingerprint import collect, driver_module, environment, iommu, numa, nvidia_smi, nvml, pcie_path, system
from bench.common.links import link_summary
from tests.conftest import FIXTURES, REPO
from tests.support import host_tree
from tests.support.nvml_capture import fake_pynvml as capture_pynvml, load

SCHEMA = json.loads((REPO / "schema" / "fingerprint.schema.json").read_text())
VALIDATOR = Draft202012Validator(SCHEMA)
GPU_VALIDATOR = Draft202012Validator({**SCHEMA["$defs"]["gpu"], "$defs": SCHEMA["$defs"]})
UUIDS = ("GPU-882b8b4e-0c7b-f159-a10e-21ce7868fb96", "GPU-d952b138-dee3-1f00-ce7d-aa510a60f72b")

# `nvidia-smi topo -m` as printed in seed 001: two NV4 pairs joined by SYS.
SEED_001_TOPO = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV4\tSYS\tSYS\t0,2,4,6,8,10\t0
GPU1\tNV4\t X \tSYS\tSYS\t0,2,4,6,8,10\t0
GPU2\tSYS\tSYS\t X \tNV4\t1,3,5,7,9,11\t1
GPU3\tSYS\tSYS\tNV4\t X \t1,3,5,7,9,11\t1

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def assert_valid(fp: dict) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(fp)]
    assert not errors, errors


def test_schema_is_valid_draft_2020_12():
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$id"] == "urn:ddpbench:schema:fingerprint"


def test_query_xml_h200x2():
    parsed = nvidia_smi.parse_query_xml(fixture("nvidia-smi-q.xml"))
    assert parsed["driver_version"] == "580.159.04"
    assert parsed["cuda_driver_version"] == "13.0"
    gpus = parsed["gpus"]
    assert [gpu["name"] for gpu in gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert [gpu["pci_bus_id"] for gpu in gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    for index, gpu in enumerate(gpus):
        assert gpu["index"] == index
        assert gpu["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
        assert gpu["power_limit_w"] == 700.0
        assert gpu["max_sm_clock_mhz"] == 1980
        assert gpu["max_mem_clock_mhz"] == 3201
        assert gpu["memory_total_bytes"] == 143771 * 2**20 == 150754820096  # NVML agrees (nvml.json)
        assert gpu["uuid_sha256"] == sha16(UUIDS[index])
        assert not list(GPU_VALIDATOR.iter_errors(gpu))
    dumped = json.dumps(parsed)
    assert not any(uuid in dumped for uuid in UUIDS)


def test_query_xml_older_power_tag_and_na():
    xml = """<nvidia_smi_log><driver_version>535.104.05</driver_version><cuda_version>12.2</cuda_version>
      <gpu id="00000000:01:00.0"><product_name>NVIDIA GeForce RTX 4090</product_name><uuid>N/A</uuid>
      <pci><pci_gpu_link_info><pcie_gen><max_link_gen>4</max_link_gen><current_link_gen>1</current_link_gen></pcie_gen>
      <link_widths><max_link_width>16x</max_link_width><current_link_width>4x</current_link_width></link_widths>
      </pci_gpu_link_info></pci><power_readings><power_limit>450.00 W</power_limit></power_readings>
      <fb_memory_usage><total>24564 MiB</total></fb_memory_usage></gpu></nvidia_smi_log>"""
    gpu = nvidia_smi.parse_query_xml(xml)["gpus"][0]
    assert gpu["pci_bus_id"] == "00000000:01:00.0"  # from the gpu element's id
    assert gpu["uuid_sha256"] is None
    assert gpu["pcie"] == {"gen_current": 1, "gen_max": 4, "width_current": 4, "width_max": 16}
    assert gpu["power_limit_w"] == 450.0
    assert gpu["max_sm_clock_mhz"] is None
    assert gpu["memory_total_bytes"] == 24564 * 2**20


def test_topo_matrix_h200x2_despite_ansi_codes():
    text = fixture("topo-m.txt")
    assert "\x1b[4m" in text  # the header really is wrapped in escape codes
    topo = nvidia_smi.parse_topo_matrix(text)
    assert topo == {
        "matrix": {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}},
        "cpu_affinity": {"GPU0": "0-31", "GPU1": "0-31"},
        "numa_affinity": {"GPU0": "0", "GPU1": "0"},
    }


def test_topo_matrix_seed_001_four_gpus():
    topo = nvidia_smi.parse_topo_matrix(SEED_001_TOPO)
    assert topo["matrix"] == {
        "GPU0": {"GPU1": "NV4", "GPU2": "SYS", "GPU3": "SYS"},
        "GPU1": {"GPU0": "NV4", "GPU2": "SYS", "GPU3": "SYS"},
        "GPU2": {"GPU0": "SYS", "GPU1": "SYS", "GPU3": "NV4"},
        "GPU3": {"GPU0": "SYS", "GPU1": "SYS", "GPU2": "NV4"},
    }
    assert topo["cpu_affinity"] == {"GPU0": "0,2,4,6,8,10", "GPU1": "0,2,4,6,8,10",
                                    "GPU2": "1,3,5,7,9,11", "GPU3": "1,3,5,7,9,11"}
    assert topo["numa_affinity"] == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
    # The same matrix printed with spaces instead of tabs parses the same.
    assert nvidia_smi.parse_topo_matrix(SEED_001_TOPO.replace("\t", "  ")) == topo


def test_topo_matrix_without_gpus_is_none():
    assert nvidia_smi.parse_topo_matrix("NVML: Unable to determine the device handle\n") is None


def test_p2p_read_h200x2():
    text = fixture("topo-p2p.txt")
    assert nvidia_smi.parse_p2p_matrix(text) == {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}
    # The capture holds five matrices; the last one (-p2p p) says NS: only the first is read.
    last = text[text.index("### nvidia-smi topo -p2p p"):]
    assert nvidia_smi.parse_p2p_matrix(last) == {"GPU0": {"GPU1": "NS"}, "GPU1": {"GPU0": "NS"}}


def test_nvlink_status_h200x2():
    status = nvidia_smi.parse_nvlink_status(fixture("nvlink-s.txt"))
    assert status == {0: {"active_links": 18, "link_speed_gbps": 26.562},
                      1: {"active_links": 18, "link_speed_gbps": 26.562}}


def test_nvlink_status_inactive_links_and_no_nvlink():
    text = "GPU 0: NVIDIA A100 (UUID: GPU-x)\n\t Link 0: <inactive>\n\t Link 1: 25 GB/s\nGPU 1: NVIDIA A100 (UUID: GPU-y)\n"
    assert nvidia_smi.parse_nvlink_status(text) == {0: {"active_links": 1, "link_speed_gbps": 25.0},
                                                    1: {"active_links": 0, "link_speed_gbps": None}}


def h200x2_fingerprint() -> dict:
    """The parts of a fingerprint that link_summary reads, built from the h200x2 captures."""
    gpus = nvidia_smi.parse_query_xml(fixture("nvidia-smi-q.xml"))["gpus"]
    for gpu, status in zip(gpus, nvidia_smi.parse_nvlink_status(fixture("nvlink-s.txt")).values()):
        gpu["nvlink"] = status
    return {"gpus": gpus, "topology": nvidia_smi.parse_topo_matrix(fixture("topo-m.txt"))}


def pcie_gpu(gen: int, width: int) -> dict:
    return {"name": "NVIDIA GeForce RTX 4090", "pcie": {"gen_current": gen, "gen_max": 4, "width_current": width, "width_max": 16},
            "nvlink": {"active_links": 0, "link_speed_gbps": None}}


def test_link_summary_nvlink_h200x2():
    summary = link_summary(h200x2_fingerprint())
    assert summary == {"gpu": "NVIDIA H200", "gpu_count": 2, "link_class": "nvlink",
                       "link_label": "2x NVIDIA H200, NVLink NV18", "link_peak_gbps": pytest.approx(18 * 26.562)}
    assert 478 < summary["link_peak_gbps"] < 478.2


def test_link_summary_pcie_and_none():
    fp = {"gpus": [pcie_gpu(4, 4), pcie_gpu(4, 4)], "topology": {"matrix": {"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}}}}
    summary = link_summary(fp)
    assert summary["link_class"] == "pcie"
    assert summary["link_label"] == "2x NVIDIA GeForce RTX 4090, PCIe 4.0 x4"
    assert summary["link_peak_gbps"] == pytest.approx(7.876)
    slowest = link_summary({"gpus": [pcie_gpu(4, 16), pcie_gpu(3, 8)], "topology": {"matrix": None}})
    assert (slowest["link_label"], slowest["link_peak_gbps"]) == ("2x NVIDIA GeForce RTX 4090, PCIe 3.0 x8", pytest.approx(7.88))
    assert link_summary({"gpus": []})["link_class"] == "none"


def test_link_summary_seed_001():
    gpus = [{"name": "NVIDIA A100-SXM4-40GB", "pcie": {"gen_current": 4, "width_current": 16},
             "nvlink": {"active_links": 4, "link_speed_gbps": 25.0}} for _ in range(4)]
    summary = link_summary({"gpus": gpus, "topology": nvidia_smi.parse_topo_matrix(SEED_001_TOPO)})
    assert (summary["link_class"], summary["link_label"], summary["link_peak_gbps"]) == \
        ("nvlink", "4x NVIDIA A100-SXM4-40GB, NVLink NV4", 100.0)


def test_env_allow_list():
    env = {"NCCL_DEBUG": "INFO", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x", "NCCL_SOME_TOKEN": "t",
           "CUDA_VISIBLE_DEVICES": "0,1", "LD_LIBRARY_PATH": "/usr/lib", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert environment.allowed(env) == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO",
                                        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def fake_pynvml(capture: dict):
    """A pynvml stand-in answering with the h200x2 NVML capture, whose NVLink calls failed."""
    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(f"NVML error {value}")
            self.value = value

    def gpu(handle):
        return capture["gpus"][handle]

    return SimpleNamespace(
        NVMLError=NVMLError, NVML_ERROR_NOT_SUPPORTED=3, NVML_ERROR_LIBRARY_NOT_FOUND=12, NVML_ERROR_DRIVER_NOT_LOADED=9,
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_NVLINK_MAX_LINKS=18,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: capture["driver"],
        nvmlSystemGetCudaDriverVersion=lambda: capture["cuda_driver"],
        nvmlDeviceGetCount=lambda: len(capture["gpus"]),
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetName=lambda h: gpu(h)["name"],
        nvmlDeviceGetUUID=lambda h: gpu(h)["uuid"].encode(),  # older bindings return bytes
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=gpu(h)["pci_bus_id"]),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=gpu(h)["mem_total"]),
        nvmlDeviceGetCurrPcieLinkGeneration=lambda h: gpu(h)["pcie_gen_cur"],
        nvmlDeviceGetMaxPcieLinkGeneration=lambda h: gpu(h)["pcie_gen_max"],
        nvmlDeviceGetCurrPcieLinkWidth=lambda h: gpu(h)["pcie_width_cur"],
        nvmlDeviceGetMaxPcieLinkWidth=lambda h: gpu(h)["pcie_width_max"],
        nvmlDeviceGetEnforcedPowerLimit=lambda h: gpu(h)["power_limit_mw"],
        nvmlDeviceGetMaxClockInfo=lambda h, clock: gpu(h)["max_sm_mhz" if clock == 1 else "max_mem_mhz"],
        nvmlDeviceGetCudaComputeCapability=lambda h: tuple(gpu(h)["cc"]),
        # no nvmlDeviceGetNvLinkState: AttributeError, as in the capture
    )


NEWER_THAN_NVML_CAPTURE = {"bar1_total_bytes": None, "persistence_mode": None}


def test_nvml_reader_h200x2_tolerates_missing_nvlink_calls():
    errors: list[str] = []
    read = nvml.read(errors, fake_pynvml(json.loads(fixture("nvml.json"))))
    assert (read["driver_version"], read["cuda_driver_version"]) == ("580.159.04", "13.0")
    assert [gpu["uuid_sha256"] for gpu in read["gpus"]] == [sha16(uuid) for uuid in UUIDS]
    xml_gpus = nvidia_smi.parse_query_xml(fixture("nvidia-smi-q.xml"))["gpus"]
    for gpu, from_xml in zip(read["gpus"], xml_gpus):
        assert not list(GPU_VALIDATOR.iter_errors(gpu))
        assert gpu["compute_capability"] == "9.0"
        assert gpu["nvlink"] == {"active_links": None, "link_speed_gbps": None}
        # Both sources describe the same GPU the same way; the NVML capture predates the BAR1 and
        # persistence reads (not measured there), which the XML has.
        assert {**gpu, "compute_capability": None, **NEWER_THAN_NVML_CAPTURE} == {**from_xml, **NEWER_THAN_NVML_CAPTURE}
        assert (gpu["bar1_total_bytes"], gpu["persistence_mode"]) == (None, None)
        assert (from_xml["bar1_total_bytes"], from_xml["persistence_mode"]) == (262144 << 20, True)
    assert len(errors) == 2 and all("nvlink: AttributeError" in error for error in errors)
    assert not any(uuid in json.dumps(read) for uuid in UUIDS)


def test_nvml_not_installed_or_no_driver_is_not_an_error():
    errors: list[str] = []
    assert nvml.read(errors, None) is None
    no_driver = fake_pynvml({"gpus": []})

    def fail():
        raise no_driver.NVMLError(12)
    no_driver.nvmlInit = fail
    assert nvml.read(errors, no_driver) is None
    assert errors == []


def test_collect_live_validates(tmp_path):
    pin = {"image": "ghcr.io/ddpbench/agent:1.0", "digest": "sha256:" + "ab" * 32, "git_commit": "0123abc", "extra": "x"}
    (tmp_path / "pin.json").write_text(json.dumps(pin))
    fp = collect({"DDPBENCH_IMAGE_PIN": str(tmp_path / "pin.json"), "NCCL_DEBUG": "INFO", "HOME": "/root"})
    assert_valid(fp)
    assert fp["gpu_count"] == len(fp["gpus"]) == 0  # this test machine has no GPU
    assert fp["cpu"]["logical_cpus"] >= 1
    assert fp["container"]["digest"] == pin["digest"]
    assert fp["container"]["image"] == pin["image"]
    assert fp["container"]["pin"] == {"image": pin["image"], "digest": pin["digest"], "git_commit": "0123abc"}
    assert fp["env"] == {"NCCL_DEBUG": "INFO"}
    assert fp["host"]["hostname_sha256"] == sha16(os.uname().nodename)


def test_collect_image_from_env_and_unreadable_pin(tmp_path):
    fp = collect({"DDPBENCH_IMAGE_PIN": str(tmp_path / "absent.json"), "DDPBENCH_IMAGE": "agent:dev"})
    assert fp["container"] == {"image": "agent:dev", "digest": None, "pin": None}
    (tmp_path / "bad.json").write_text("{not json")
    fp = collect({"DDPBENCH_IMAGE_PIN": str(tmp_path / "bad.json"), "DDPBENCH_IMAGE": "agent:dev"})
    assert_valid(fp)
    assert fp["container"]["image"] == "agent:dev"
    assert any(error.startswith("container: JSONDecodeError") for error in fp["probe_errors"])


def collect_in_subprocess(blocked: tuple[str, ...], path_prefix: str | None = None, shims: "Path | None" = None) -> dict:
    """collect() in a fresh interpreter where `blocked` modules cannot be imported, by it or by
    the children it starts (a package of each name that raises ImportError, first on the path)."""
    env = {**os.environ, "DDPBENCH_IMAGE_PIN": "/nonexistent/pin.json"}
    if blocked:
        for name in blocked:
            (shims / name).mkdir(parents=True)
            (shims / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked for this test')\n")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shims), os.environ.get("PYTHONPATH")]))
    code = "import json; from bench.agent.fingerprint import collect; print(json.dumps(collect()))"
    if path_prefix:
        env["PATH"] = path_prefix + os.pathsep + env["PATH"]
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("blocked", [("psutil", "pynvml"), ("psutil", "pynvml", "torch")])
def test_collect_without_optional_packages(blocked, tmp_path):
    fp = collect_in_subprocess(blocked, shims=tmp_path)
    assert_valid(fp)
    assert fp["gpu_count"] == 0
    assert fp["cpu"]["logical_cpus"] >= 1 and fp["memory_total_bytes"] > 0  # from /proc
    assert (fp["software"]["torch"] is None) == ("torch" in blocked)


@pytest.mark.slow
@pytest.mark.parametrize("nvlink_prints, links, link_speed_gbps", [("nvlink-s.txt", 18, 26.562), (None, 0, None)])
def test_collect_through_nvidia_smi_h200x2(tmp_path, nvlink_prints, links, link_speed_gbps):
    """Without pynvml, collect() reads GPUs from nvidia-smi: a stand-in prints the h200x2
    captures; `nvlink -s` printing nothing (as on a lone H100) means no active link."""
    p2p = fixture("topo-p2p.txt")
    (tmp_path / "p2p-w.txt").write_text(p2p[p2p.index("### nvidia-smi topo -p2p w"):])
    answers = {"-q -x": FIXTURES / "nvidia-smi-q.xml", "topo -m": FIXTURES / "topo-m.txt",
               "topo -p2p r": FIXTURES / "topo-p2p.txt", "topo -p2p w": tmp_path / "p2p-w.txt",
               "nvlink -s": FIXTURES / nvlink_prints if nvlink_prints else "/dev/null"}
    cases = "".join(f'  "{args}") cat "{path}";;\n' for args, path in answers.items())
    script = tmp_path / "nvidia-smi"
    script.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}  *) exit 2;;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    fp = collect_in_subprocess(("pynvml",), path_prefix=str(tmp_path), shims=tmp_path / "shims")
    assert_valid(fp)
    assert fp["probes"]["gpu_source"] == "nvidia-smi"
    assert (fp["gpu_count"], fp["driver_version"], fp["cuda_driver_version"]) == (2, "580.159.04", "13.0")
    assert fp["gpus"][1]["nvlink"] == {"active_links": links, "link_speed_gbps": link_speed_gbps}
    assert fp["topology"]["matrix"]["GPU1"] == {"GPU0": "NV18"}
    assert fp["topology"]["p2p_read"]["GPU0"] == fp["topology"]["p2p_write"]["GPU0"] == {"GPU1": "OK"}
    assert [gpu["persistence_mode"] for gpu in fp["gpus"]] == [True, True]
    assert fp["probe_errors"] == []
    assert not any(uuid in json.dumps(fp) for uuid in UUIDS)
    assert link_summary(fp)["link_label"] == "2x NVIDIA H200, NVLink NV18"


def test_fingerprint_imports_no_controller_side_packages():
    code = ("import sys; import bench.agent.fingerprint; "
            "print([m for m in sys.modules if m.split('.')[0] in ('jsonschema', 'yaml') "
            "or m.startswith(('bench.controller', 'bench.bundle', 'bench.report'))])")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- The host around the GPUs: the driver's module, the PCIe path, the IOMMU, NUMA, /dev/shm ---

RTX_GPUS = [{"index": 0, "pci_bus_id": "00000000:01:00.0"}, {"index": 1, "pci_bus_id": "00000000:81:00.0"}]


def test_host_readings_from_the_consumer_box_files(tmp_path):
    root = host_tree.build("rtx4090x2", tmp_path)
    assert driver_module.read(root, modinfo=lambda: None) == {"flavor": "proprietary", "version": "570.133.07"}
    assert pcie_path.read(RTX_GPUS, root) == {
        "gpus": {"GPU0": ["0000:00:01.0"], "GPU1": ["0000:80:01.0"]},
        "bridges": {bridge: {"acs_ctl": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]} for bridge in ("0000:00:01.0", "0000:80:01.0")},
    }
    assert iommu.read(RTX_GPUS, root) == {"mode": "translated", "units": ["dmar0", "dmar1"],
                                          "gpu_domain_types": {"GPU0": "DMA-FQ", "GPU1": "DMA-FQ"}, "cmdline": ["intel_iommu=on"]}
    assert numa.read(RTX_GPUS, root, allowed={0, 1, 2, 3, 8}) == {
        "node_cpus": {"0": "0-15", "1": "16-31"}, "gpu_nodes": {"GPU0": 0, "GPU1": 1}, "allowed_cpus": "0-3,8"}


def config_space(size: int, capabilities: list[tuple[int, int, int]]) -> bytes:
    """A configuration space of `size` bytes holding extended capabilities (offset, id, second dword)
    chained in the order given."""
    space = bytearray(size)
    for i, (offset, cap_id, second) in enumerate(capabilities):
        following = capabilities[i + 1][0] if i + 1 < len(capabilities) else 0
        space[offset:offset + 8] = (cap_id | 1 << 16 | following << 20).to_bytes(4, "little") + second.to_bytes(4, "little")
    return bytes(space)


def test_acs_control_is_found_along_the_capability_chain_and_unknown_without_privilege():
    aer, acs = (0x100, 0x0001, 0), (0x148, 0x000D, 0x0005_007F)  # ACS control: SrcValid, ReqRedir
    assert pcie_path.acs_control(config_space(4096, [aer, acs])) == ["SrcValid", "ReqRedir"]
    assert pcie_path.acs_control(config_space(4096, [aer])) == []  # no ACS capability
    assert pcie_path.acs_control(config_space(256, [])) == []  # conventional PCI: no extended space
    assert pcie_path.acs_control(config_space(4096, [aer, acs])[:64]) is None  # what a process without CAP_SYS_ADMIN reads
    looped = bytearray(config_space(4096, [aer]))
    looped[0x100:0x104] = (0x0001 | 1 << 16 | 0x100 << 20).to_bytes(4, "little")  # a capability that names itself next
    assert pcie_path.acs_control(bytes(looped)) == []


def test_sysfs_addresses_and_a_gpu_sysfs_does_not_show(tmp_path):
    assert pcie_path.sysfs_address("00000000:81:00.0") == "0000:81:00.0"
    assert pcie_path.sysfs_address("0000:0A:00.1") == "0000:0a:00.1"
    assert pcie_path.sysfs_address("GPU-x") is None and pcie_path.sysfs_address(None) is None
    root = host_tree.build("rtx4090x2", tmp_path)
    stranger = [*RTX_GPUS, {"index": 2, "pci_bus_id": "00000000:c1:00.0"}]
    assert set(pcie_path.read(stranger, root)["gpus"]) == {"GPU0", "GPU1"}


def test_a_machine_without_any_of_these_files_records_nulls(tmp_path):
    assert driver_module.read(tmp_path, modinfo=lambda: None) == {"flavor": None, "version": None}
    assert pcie_path.read(RTX_GPUS, tmp_path) is None
    assert iommu.read(RTX_GPUS, tmp_path) == {"mode": None, "units": None, "gpu_domain_types": {}, "cmdline": []}
    assert numa.read(RTX_GPUS, tmp_path, allowed=set()) == {"node_cpus": {}, "gpu_nodes": {}, "allowed_cpus": None}
    assert system.dev_shm_total_bytes(tmp_path / "no-shm") is None
    (tmp_path / "sys/class/iommu").mkdir(parents=True)
    assert iommu.read(RTX_GPUS, tmp_path)["mode"] == "off"  # the kernel registered no IOMMU


# The start of a /proc/cpuinfo whose model name hides the generation, as the lent H100 VMs' does.
MASKED_XEON = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Processor
stepping\t: 8
microcode\t: 0x2b000603

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 106
stepping\t: 6
"""
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n"


def test_the_cpus_generation_is_recorded_where_a_vm_masks_its_name():
    assert system.cpu_identity(MASKED_XEON) == "GenuineIntel family 6 model 143 stepping 8"  # the first processor's
    assert system.cpu_identity(ARM) is None and system.cpu_identity("") is None
    if platform.machine() in ("x86_64", "AMD64"):  # this machine's own, in the fingerprint
        assert re.fullmatch(r"\S+ family \d+ model \d+ stepping \d+", system.cpu()["identity"])


def test_the_fingerprint_times_a_python_call_on_one_core():
    assert 10 < collect()["cpu"]["python_call_ns"] < 100_000  # some 400-1,100 ns on the machines measured


def test_dev_shm_is_the_filesystems_size():
    stat = os.statvfs("/dev/shm")
    assert system.dev_shm_total_bytes() == stat.f_blocks * stat.f_frsize


def test_kernel_module_flavor_from_its_banner_or_its_license():
    # First lines of /proc/driver/nvidia/version as published (NVIDIA/open-gpu-kernel-modules users, forums).
    assert driver_module.parse_version_file(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.58.02  Release Build  (dvs-builder@U16-I3-B03-4-3)  "
        "Tue Jun 25 01:26:03 UTC 2024\nGCC version:  gcc version 14.2.1") == {"flavor": "open", "version": "555.58.02"}
    assert driver_module.parse_version_file("NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022") == {
        "flavor": "proprietary", "version": "515.76"}
    assert driver_module.parse_version_file("nothing here") is None
    assert driver_module.parse_modinfo("filename:       /lib/modules/nvidia.ko\nversion:        570.133.07\nlicense:        Dual MIT/GPL\n") == {
        "flavor": "open", "version": "570.133.07"}
    assert driver_module.parse_modinfo("license:        NVIDIA\n") == {"flavor": "proprietary", "version": None}
    assert driver_module.read(Path("/nonexistent"), modinfo=lambda: "version: 570.1\nlicense: NVIDIA\n")["flavor"] == "proprietary"


def test_nvml_reads_persistence_mode_and_bar1_where_the_gpu_tells():
    capture = load("rtx4090x2")
    capture["gpus"][0]["bar1_total"] = 256 << 20
    read = nvml.read([], capture_pynvml(capture))
    assert [(gpu["persistence_mode"], gpu["bar1_total_bytes"]) for gpu in read["gpus"]] == [(False, 256 << 20), (False, None)]
    for gpu in read["gpus"]:
        assert not list(GPU_VALIDATOR.iter_errors(gpu))


def test_collect_on_a_bare_root_validates_and_states_what_each_probe_cost(tmp_path):
    fp = collect({"DDPBENCH_IMAGE_PIN": str(tmp_path / "absent.json")}, root=tmp_path)
    assert_valid(fp)
    assert (fp["kernel_module"], fp["pcie_path"], fp["dev_shm_total_bytes"]) == ({"flavor": None, "version": None}, None, None)
    assert fp["probe_errors"] == []
    assert {"nvml", "iommu", "numa", "/dev/shm"} <= set(fp["probes"]["durations_s"])
    assert fp["probes"]["duration_s"] >= max(fp["probes"]["durations_s"].values())


def test_the_agent_reads_torchs_versions_without_importing_torch():
    """torch is read in a child: the agent's own process never spends the seconds of importing it."""
    code = ("import sys, json; import bench.agent.__main__; from bench.agent.fingerprint import collect; "
            "fp = collect(); print(json.dumps([fp['software']['torch'], 'torch' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DDPBENCH_IMAGE_PIN": "/nonexistent/pin.json"})
    assert done.returncode == 0, done.stderr
    version, imported = json.loads(done.stdout)
    import torch

    assert version == torch.__version__ and not imported
