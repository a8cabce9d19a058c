# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""hardware_groups: one probe per group of hosts with identical inputs of N, confirmed on each host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import hardware_groups as hg
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import fingerprint_inputs
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import hardware_identity
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report.fleet_report import plan_lines

MODEL = {"kind": "hub", "id": "Qwen/Qwen3.5-0.8B", "revision": "main"}


def h200(index, uuid, driver="580.159.04", name="NVIDIA H200", cap="9.0"):
    return {"index": index, "uuid": uuid, "name": name, "memory_total_mib": 143771, "memory_used_mib": 5,
            "driver_version": driver, "compute_cap": cap}


def inputs(gpus, probe_mode="shrunk", **options):
    return fingerprint_inputs(MODEL, "0.32.0", probe_mode=probe_mode,
                              hardware=hardware_identity("cuda", gpus=gpus), **options)


def test_identical_gpus_on_other_machines_share_a_group_whatever_their_uuids():
    a = inputs([h200(0, "GPU-aaa")])
    b = inputs([h200(0, "GPU-bbb")], probe_mode="full")
    assert a["hardware"] != b["hardware"]  # the probe's cache never crosses machines
    assert hg.group_key(a) == hg.group_key(b)
    groups = hg.form_groups([("h1", a), ("h2", b), ("h3", inputs([h200(3, "GPU-ccc")]))])
    assert [(g["name"], g["canary"], g["members"]) for g in groups] == [("G1", "h1", ["h1", "h2", "h3"])]


@pytest.mark.parametrize("other", [
    inputs([h200(0, "GPU-x", driver="575.51.03")]),
    inputs([h200(0, "GPU-x", name="NVIDIA H100", cap="9.0")]),
    inputs([h200(0, "GPU-x", name="NVIDIA B200", cap="10.0")]),
    inputs([h200(0, "GPU-x"), h200(1, "GPU-y")]),
    inputs([h200(0, "GPU-x")], tensor_parallel_size=2),
    inputs([h200(0, "GPU-x")], kv_cache_dtype="fp8"),
    inputs([h200(0, "GPU-x")], speculative_config={"method": "mtp", "num_speculative_tokens": 2}),
    inputs([h200(0, "GPU-x")], block_size=32),
    fingerprint_inputs(MODEL, "0.33.0", hardware=hardware_identity("cuda", gpus=[h200(0, "GPU-x")])),
], ids=["driver", "gpu-model", "compute-capability", "gpu-count", "tp", "kv-dtype", "speculative", "block", "vllm"])
def test_any_input_of_n_that_differs_splits_the_group(other):
    base = inputs([h200(0, "GPU-b")])
    groups = hg.form_groups([("base", base), ("other", other)])
    assert [g["members"] for g in groups] == [["base"], ["other"]]


def test_cpu_hosts_group_by_model_and_isa():
    cpu = {"machine": "x86_64", "model": "Xeon", "isa": ["avx2", "avx512f"]}

    def cpu_inputs(info):
        return fingerprint_inputs(MODEL, "0.32.0+cpu", hardware=hardware_identity("cpu", cpu=info))
    groups = hg.form_groups([("c1", cpu_inputs(cpu)), ("c2", cpu_inputs(dict(cpu))),
                             ("c3", cpu_inputs(dict(cpu, isa=["avx2"])))])
    assert [g["members"] for g in groups] == [["c1", "c2"], ["c3"]]


def test_the_canary_is_a_host_with_n_cached_and_hosts_without_inputs_probe_alone():
    a = inputs([h200(0, "GPU-a")])
    groups = hg.form_groups([("h1", a), ("lost", None), ("h2", a), ("h3", a)], cached=["h3"])
    assert [(g["name"], g["canary"], g["members"]) for g in groups] == [
        ("G1", "h3", ["h3", "h1", "h2"]), ("G2", "lost", ["lost"])]


def test_plan_groups_and_the_shown_lines():
    def row(host, tp, gpu_kind="sm90 (default for platform cuda)"):
        return {"host": host, "n_inputs": {"model": "m", "tensor_parallel_size": tp}, "gpu_kind": gpu_kind, "gpus": ""}
    rows = [row("a", 1), row("b", 2), row("c", 1), row("d", 1, gpu_kind="sm100 (given)")]
    names, groups = hg.plan_groups(rows)
    assert names == {"a": "G1", "b": "G2", "c": "G1", "d": "G3"}
    assert groups[0] == {"name": "G1", "canary": "a", "members": ["a", "c"]}
    lines = plan_lines([], "/p", groups + [{"name": "G9", "canary": "x", "members": ["x"] + ["y%d" % i for i in range(7)]}])
    assert "probe group G1: 2 host(s), probed on a, taken by c" in lines
    assert "probe group G9: 8 host(s), probed on x, taken by y0, y1, y2, y3, y4 and 2 more" in lines
