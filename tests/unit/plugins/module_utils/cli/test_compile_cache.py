# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""compile_cache: the key of a warm first start, the refusal when it differs, the start order."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache as cc
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.host_plan import plan_host

MODEL = {"kind": "hub", "id": "Qwen/Qwen3.5-0.8B", "revision": "main"}


def argv(**settings):
    settings.setdefault("vllm_server_model", "Qwen/Qwen3.5-0.8B")
    return plan_host("h", settings, n=544, n_kind="expected")["vllm"]["argv"]


def key(**overrides):
    parts = dict(vllm_version="0.32.0", gpu_architecture="sm90", driver_version="580.159.04", model=MODEL,
                 argv=argv(), env={"VLLM_USE_FLASHINFER_SAMPLER": "0", "HOME": "/var/lib/vllm"},
                 home="/var/lib/vllm")
    parts.update(overrides)
    return cc.cache_key(**parts)


def test_the_cache_directories_follow_the_units_home_and_cache_root():
    plan = plan_host("h", {"vllm_server_model": "m/x"})["vllm"]
    dirs = cc.cache_dirs(plan["home"], plan["environment"]["VLLM_CACHE_ROOT"])
    assert dirs == ["%s/cache/torch_compile_cache" % plan["home"], "%s/cache/torch_aot_compile" % plan["home"],
                    "%s/.triton/cache" % plan["home"], "%s/.cache/flashinfer" % plan["home"]]


def test_serving_only_flags_do_not_enter_the_key_and_graph_flags_do():
    graph = cc.graph_argv(argv())
    assert "--port" not in graph and "--host" not in graph and "--served-model-name" not in graph
    assert "--kv-transfer-config" not in graph and "Qwen/Qwen3.5-0.8B" not in graph
    assert graph[:2] == ["--tensor-parallel-size", "1"] and "--max-num-batched-tokens" in graph
    assert key(argv=argv(vllm_server_port=8001, lmcache_server_port=5556)) == key()
    assert cc.graph_argv(["vllm", "serve", "m", "--port=1", "--enforce-eager", "--disable-log-stats"]) == ["--enforce-eager"]


def test_an_equal_key_seeds_and_names_the_source():
    ok, sentence = cc.seed_decision("gpu-01", key(), "gpu-02", key(env={"VLLM_USE_FLASHINFER_SAMPLER": "0", "HOME": "/x"}))
    assert ok and sentence.startswith("host gpu-02: seeded with the compile caches of gpu-01 (key ")


@pytest.mark.parametrize("override,words", [
    ({"vllm_version": "0.33.0"}, 'vllm_version ("0.33.0" here, "0.32.0" there)'),
    ({"gpu_architecture": "sm100"}, "gpu_architecture"),
    ({"driver_version": "575.51.03"}, "driver_version"),
    ({"model": dict(MODEL, revision="v2")}, "model"),
    ({"argv": argv(vllm_server_tensor_parallel_size=2, vllm_server_gpus=["0", "1"])}, "--tensor-parallel-size 2 here"),
    ({"argv": argv(vllm_server_kv_cache_dtype="fp8")}, "the flags that change the compiled graph"),
    ({"env": {"VLLM_USE_FLASHINFER_SAMPLER": "1"}}, "the environment (VLLM_USE_FLASHINFER_SAMPLER)"),
    ({"home": "/srv/vllm"}, 'home ("/srv/vllm" here, "/var/lib/vllm" there)'),
], ids=["vllm", "arch", "driver", "model", "tp", "kv-dtype", "env", "home"])
def test_a_key_that_differs_refuses_the_copy_and_says_what_differs(override, words):
    ok, sentence = cc.seed_decision("gpu-01", key(), "gpu-02", key(**override))
    assert not ok
    assert sentence.startswith("host gpu-02: the compile caches of gpu-01 are not copied, their key differs: ")
    assert words in sentence and sentence.endswith("the host compiles on its first start")
    assert cc.tarball_name(key()) != cc.tarball_name(key(**override))


def test_transfer_report():
    assert cc.transfer_report("b", "a", 3 * 1048576, 2.25) == "host b: compile caches of a, 3.0 MiB in 2.2 s through the control node"


def test_first_starts_go_one_host_per_group_then_the_rest():
    groups = [{"members": ["a1", "a2", "a3"]}, {"members": ["b1"]}, {"members": ["c1", "c2"]}]
    assert cc.start_batches(groups) == [["a1", "b1", "c1"], ["a2", "a3", "c2"]]
    assert cc.start_batches(groups, batch_size=2) == [["a1", "b1", "c1"], ["a2", "a3"], ["c2"]]
    assert cc.start_batches([{"members": ["solo"]}]) == [["solo"]]
    assert cc.start_batches([]) == []


def test_the_tarball_holds_the_caches_relative_to_home():
    assert cc.home_relative_dirs("/var/lib/vllm", "/var/lib/vllm/cache") == [
        "cache/torch_compile_cache", "cache/torch_aot_compile", ".triton/cache", ".cache/flashinfer"]
    with pytest.raises(ValueError, match="not below HOME"):
        cc.home_relative_dirs("/var/lib/vllm", "/srv/cache")


def test_the_key_of_two_hosts_with_other_ports_is_equal_and_another_home_refuses_the_copy():
    # vLLM's compile hash covers paths that default from HOME: a seed under another HOME path is recompiled
    # (measured on an H200, docs/gpu.md), so the key holds the unit's HOME.
    from ansible_collections.lmcache_vllm.fleet.plugins.filter.compile_cache import FilterModule
    filters = FilterModule().filters()
    inputs = {"vllm_version": "0.32.0", "model": MODEL,
              "hardware": {"kind": "cuda", "driver_version": "580.159.04", "gpus": [{"architecture": "sm90"}]}}
    one = filters["compile_cache_key"](plan_host("a", {"vllm_server_model": "m/x"}), inputs)
    two = cc.host_key(plan_host("b", {"vllm_server_model": "m/x", "vllm_server_port": 8001}), inputs)
    assert one["hash"] == two["hash"] and one["gpu_architecture"] == "sm90"
    assert cc.seed_between("b", two, "a", one)[0] is True
    moved = cc.host_key(plan_host("d", {"vllm_server_model": "m/x", "vllm_server_home": "/srv/v"}), inputs)
    allowed, message = cc.seed_between("d", moved, "a", one)
    assert moved["hash"] != one["hash"] and allowed is False and '"/srv/v" here' in message
    other = cc.host_key(plan_host("c", {"vllm_server_model": "m/x"}), dict(inputs, vllm_version="0.33.0"))
    assert cc.seed_between("c", other, "a", one)[0] is False
    with pytest.raises(ValueError, match="probe inputs"):
        cc.host_key(None, inputs)
