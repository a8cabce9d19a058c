# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter probe_groups: the hardware groups from the probe module's inputs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter.groups import FilterModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import fingerprint_inputs
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import hardware_identity

probe_groups = FilterModule().filters()['probe_groups']


def inputs(uuid, tp=1):
    gpus = [{"index": i, "uuid": "%s-%d" % (uuid, i), "name": "NVIDIA H200", "memory_total_mib": 143771,
             "driver_version": "580.159.04", "compute_cap": "9.0"} for i in range(tp)]
    return fingerprint_inputs({"kind": "hub", "id": "Qwen/Qwen3.6-27B", "revision": "main"}, "0.32.0",
                              tensor_parallel_size=tp, hardware=hardware_identity("cuda", gpus=gpus))


def test_groups_from_the_probe_inputs_of_each_host():
    hosts = [{"host": "a", "inputs": inputs("GPU-a")}, {"host": "b", "inputs": inputs("GPU-b")},
             {"host": "c", "inputs": inputs("GPU-c", tp=2)}, {"host": "d", "inputs": None}]
    groups = probe_groups(hosts, cached=["b"])
    assert [(g["name"], g["canary"], g["members"]) for g in groups] == [
        ("G1", "b", ["b", "a"]), ("G2", "c", ["c"]), ("G3", "d", ["d"])]
    assert groups[0]["line"] == "probe group G1: 2 host(s), probed on b, taken by a"
    assert groups[0]["inputs"]["hardware"]["gpus"][0] == {
        "name": "NVIDIA H200", "compute_cap": "9.0", "architecture": "sm90", "memory_total_mib": 143771}


def test_pairs_as_ansible_zips_them():
    groups = probe_groups([["a", inputs("GPU-a")], ["b", inputs("GPU-b")], ["c", None], ["d", {}]])
    assert [g["members"] for g in groups] == [["a", "b"], ["c"], ["d"]]


def test_without_probe_groups_each_host_is_its_own_canary():
    hosts = [["a", inputs("GPU-a")], ["b", inputs("GPU-b")], ["c", None]]
    groups = probe_groups(hosts, cached=["b"], per_group=False)
    assert [(g["name"], g["canary"], g["members"]) for g in groups] == [
        ("G1", "a", ["a"]), ("G2", "b", ["b"]), ("G3", "c", ["c"])]
    assert groups[1]["line"] == "probe group G2: 1 host(s), probed on b"
    with pytest.raises(AnsibleFilterError, match="per_group must be a boolean"):
        probe_groups(hosts, per_group="false")


@pytest.mark.parametrize("bad", [None, "a", [{"inputs": {}}], [["a"]]])
def test_bad_input_names_the_expected_shape(bad):
    with pytest.raises(AnsibleFilterError, match="list of {host, inputs}"):
        probe_groups(bad)
