# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size import hardware
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import (
    GpuQueryError,
    compute_apps,
    cuda_architecture,
    cuda_visible_devices,
    gpu_inventory,
    hardware_identity,
    normalize_architecture,
    parse_compute_apps,
    parse_cpuinfo,
    parse_gpu_inventory,
    subprocess_runner,
    visible_gpus,
)

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
SMI = os.path.join(FIX, "nvidia-smi")
CPU = os.path.join(FIX, "cpuinfo")
# TEST DOUBLE of nvidia-smi: prints the fixture set FLEET_FAKE_NVIDIA_SMI of SMI
NVIDIA_SMI_DOUBLE = os.path.join(FIX, "..", "..", "doubles", "nvidia-smi-double")


def text(*parts):
    with open(os.path.join(FIX, *parts)) as f:
        return f.read()


class FakeRunCommand(object):
    """Test double of AnsibleModule.run_command: canned (rc, out, err), records argv."""

    def __init__(self, rc=0, out="", err=""):
        self.result = (rc, out, err)
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        return self.result


def test_parse_two_h200():
    gpus = parse_gpu_inventory(text("nvidia-smi", "synthetic-h200x2-query-gpu.txt"))
    assert gpus == [
        {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-6a1f0c2e-93d4-4b1e-8f0a-2f4c1d9e7a01",
         "memory_total_mib": 143771, "memory_used_mib": 1, "driver_version": "580.159.04",
         "compute_cap": "9.0"},
        {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-b7e2d3f4-11aa-4c2b-9d3e-5f6a7b8c9d02",
         "memory_total_mib": 143771, "memory_used_mib": 52350, "driver_version": "580.159.04",
         "compute_cap": "9.0"},
    ]


def test_parse_na_fields_and_mixed_gpus():
    gpus = parse_gpu_inventory(text("nvidia-smi", "synthetic-mixed-na-query-gpu.txt"))
    assert gpus[0]["memory_used_mib"] is None
    assert [g["compute_cap"] for g in gpus] == ["8.0", "8.9"]
    assert gpus[1]["name"] == "NVIDIA L40S"


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(SMI, "h200-*query-gpu*.txt"))))
def test_parse_real_h200_captures(path):
    with open(path) as f:
        gpus = parse_gpu_inventory(f.read())
    assert gpus and all(g["compute_cap"] == "9.0" and "H200" in g["name"] for g in gpus)


def test_parse_name_with_comma():
    gpus = parse_gpu_inventory("0, Weird, GPU, GPU-1, 100, 1, 1.0, 9.0\n")
    assert gpus[0]["name"] == "Weird, GPU" and gpus[0]["uuid"] == "GPU-1"


@pytest.mark.parametrize("bad", ["0, NVIDIA H200, GPU-1\n", "x, NVIDIA H200, GPU-1, 1, 1, 1, 9.0\n",
                                 "0, NVIDIA H200, GPU-1, lots, 1, 1, 9.0\n",
                                 "0, NVIDIA H200, GPU-1, 1, 1, 1, nine\n"])
def test_parse_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_gpu_inventory(bad)


def test_gpu_inventory_runs_the_documented_query():
    run = FakeRunCommand(out=text("nvidia-smi", "synthetic-h200x2-query-gpu.txt"))
    gpus = gpu_inventory(run, nvidia_smi="/usr/bin/nvidia-smi")
    assert len(gpus) == 2
    assert run.calls == [["/usr/bin/nvidia-smi",
                          "--query-gpu=index,name,uuid,memory.total,memory.used,driver_version,compute_cap",
                          "--format=csv,noheader,nounits"]]


def test_gpu_inventory_driver_failure_quotes_nvidia_smi():
    run = FakeRunCommand(rc=9, out=text("nvidia-smi", "no-driver-fail.txt"))
    with pytest.raises(GpuQueryError) as e:
        gpu_inventory(run)
    assert "rc 9" in str(e.value) and "couldn't communicate with the NVIDIA driver" in str(e.value)
    assert e.value.rc == 9 and e.value.argv[0] == "nvidia-smi"


def test_gpu_inventory_unparsable_is_query_error():
    with pytest.raises(GpuQueryError, match="not the 7 fields"):
        gpu_inventory(FakeRunCommand(out="Segmentation fault\n"))


def test_gpu_inventory_missing_executable():
    run = subprocess_runner()
    with pytest.raises(GpuQueryError, match="rc 127"):
        gpu_inventory(run, nvidia_smi="/nonexistent/nvidia-smi")


def test_readers_through_the_nvidia_smi_double(monkeypatch, tmp_path):
    pids = tmp_path / "pids"
    pids.write_text("4242 4243\n")
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "synthetic-h200x2")
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI_HOLD_PIDS_FILE", str(pids))
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI_HOLD_CALLS", "1")
    run = subprocess_runner()
    assert [(g["index"], g["memory_used_mib"]) for g in gpu_inventory(run, nvidia_smi=NVIDIA_SMI_DOUBLE)] == [
        (0, 1), (1, 52350)]
    assert compute_apps(run, nvidia_smi=NVIDIA_SMI_DOUBLE) == [
        {"pid": 4242, "used_memory_mib": 1024}, {"pid": 4243, "used_memory_mib": 1024}]
    assert compute_apps(run, nvidia_smi=NVIDIA_SMI_DOUBLE) == []


def test_parse_compute_apps_empty_and_no_running():
    assert parse_compute_apps("") == []
    assert parse_compute_apps("No running processes found\n") == []
    assert parse_compute_apps("12, [N/A]\n") == [{"pid": 12, "used_memory_mib": None}]
    with pytest.raises(ValueError):
        parse_compute_apps("pid, used_memory\n")


@pytest.mark.parametrize("cvd,want", [
    (None, [0, 1]), ("", []), ("1", [1]), ("1,0", [1, 0]), ("0,7,1", [0]), ("-1", []),
    ("GPU-b7e2d3f4", [1]), ("GPU-b7e2d3f4-11aa-4c2b-9d3e-5f6a7b8c9d02,0", [1, 0]),
    ("GPU-", []), (" 1 , 0 ", [1, 0]), ("1,1", [1]),
])
def test_visible_gpus(cvd, want):
    gpus = parse_gpu_inventory(text("nvidia-smi", "synthetic-h200x2-query-gpu.txt"))
    assert [g["index"] for g in visible_gpus(gpus, cvd)] == want


def test_cuda_visible_devices_env_wins():
    assert cuda_visible_devices({"CUDA_VISIBLE_DEVICES": "1"}, {"CUDA_VISIBLE_DEVICES": "0"}) == "1"
    assert cuda_visible_devices({}, {"CUDA_VISIBLE_DEVICES": "0"}) == "0"
    assert cuda_visible_devices({}, {}) is None


@pytest.mark.parametrize("value,want", [
    ("hopper", "sm90"), ("SM90", "sm90"), ("sm_90", "sm90"), ("sm90a", "sm90"), ("9.0", "sm90"),
    ("10.0", "sm100"), ("cpu", "cpu"), ("CPU", "cpu"), ("ampere", "sm80"), (None, None), ("", None),
])
def test_normalize_architecture(value, want):
    assert normalize_architecture(value) == want


def test_normalize_architecture_unknown():
    with pytest.raises(ValueError, match="not known"):
        normalize_architecture("pentium")


def test_cuda_architecture():
    assert cuda_architecture("9.0") == "sm90" and cuda_architecture("12.0") == "sm120"
    assert cuda_architecture(None) is None


def test_cpuinfo_captured_epyc():
    cpu = parse_cpuinfo(text("cpuinfo", "amd-epyc-avx2-captured.txt"), "x86_64")
    assert cpu["model"] == "AMD EPYC" and cpu["vendor"] == "AuthenticAMD"
    assert "avx2" in cpu["isa"] and "avx512f" not in cpu["isa"]
    assert cpu["isa"] == sorted(cpu["isa"]) and "sse2" not in cpu["isa"]


def test_cpuinfo_amx_and_bf16():
    spr = parse_cpuinfo(text("cpuinfo", "synthetic-intel-spr-amx.txt"), "x86_64")
    assert {"amx_bf16", "amx_tile", "avx512_bf16", "avx512f"} <= set(spr["isa"])
    genoa = parse_cpuinfo(text("cpuinfo", "synthetic-amd-genoa-avx512bf16.txt"), "x86_64")
    assert "avx512_bf16" in genoa["isa"] and "amx_tile" not in genoa["isa"]


def test_cpuinfo_aarch64_features():
    cpu = parse_cpuinfo(text("cpuinfo", "synthetic-aarch64-neoverse-v1.txt"), "aarch64")
    assert {"asimd", "sve", "bf16", "i8mm"} <= set(cpu["isa"])
    assert cpu["model"] == "implementer 0x41 part 0xd40" and cpu["machine"] == "aarch64"


def test_read_cpuinfo_this_host():
    cpu = hardware.read_cpuinfo()
    assert cpu["machine"]


def test_read_cpuinfo_missing_file():
    assert hardware.read_cpuinfo("/nonexistent", "x86_64")["isa"] == []


def test_hardware_identity_cuda_names_the_gpus_not_their_used_memory():
    gpus = parse_gpu_inventory(text("nvidia-smi", "synthetic-h200x2-query-gpu.txt"))
    a = hardware_identity("cuda", gpus[:1])
    assert a == {"kind": "cuda", "driver_version": "580.159.04", "gpus": [
        {"index": 0, "uuid": "GPU-6a1f0c2e-93d4-4b1e-8f0a-2f4c1d9e7a01", "name": "NVIDIA H200",
         "compute_cap": "9.0", "architecture": "sm90", "memory_total_mib": 143771}]}
    busy = [dict(gpus[0], memory_used_mib=100000)]
    assert hardware_identity("cuda", busy) == a
    assert hardware_identity("cuda", gpus[1:]) != a  # another GPU (a swap) is other hardware
    assert hardware_identity("cuda", gpus) != a
    assert hardware_identity("cuda", [dict(gpus[0], driver_version="550.54.15")]) != a


def test_hardware_identity_cpu():
    cpu = parse_cpuinfo(text("cpuinfo", "synthetic-intel-spr-amx.txt"), "x86_64")
    ident = hardware_identity("cpu", cpu=cpu)
    assert ident["kind"] == "cpu" and ident["cpu_model"].startswith("Intel") and "amx_tile" in ident["isa"]
    other = hardware_identity("cpu", cpu=parse_cpuinfo(text("cpuinfo", "amd-epyc-avx2-captured.txt"), "x86_64"))
    assert other != ident


def test_real_h200_capture_identity():
    path = os.path.join(SMI, "h200-query-gpu.txt")
    if not os.path.exists(path):
        pytest.skip("no H200 capture")
    gpus = parse_gpu_inventory(text("nvidia-smi", "h200-query-gpu.txt"))
    assert gpus == [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-16e372bb-2e51-16e4-aee1-58f355b079c4",
                     "memory_total_mib": 143771, "memory_used_mib": 0, "driver_version": "580.159.04",
                     "compute_cap": "9.0"}]
    ident = hardware_identity("cuda", visible_gpus(gpus, "0"))
    assert ident["gpus"][0]["architecture"] == "sm90" and ident["driver_version"] == "580.159.04"


def test_a_driver_without_compute_cap_is_asked_again_without_it(monkeypatch):
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "old-driver")
    gpus = gpu_inventory(subprocess_runner(), nvidia_smi=NVIDIA_SMI_DOUBLE)
    assert [(g["index"], g["memory_total_mib"], g["compute_cap"]) for g in gpus] == [(0, 81920, None), (1, 40960, None)]
    assert gpus[1]["memory_used_mib"] is None
