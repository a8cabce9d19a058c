# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of block_size_probe and the Mamba cache blocks M (options ``mamba_refusal`` and ``mamba_inputs``): the
refusal found in the unit's journal is cached in the probe's cache beside N and comes back with every later answer
for the same inputs. Runs the whole module through the multi-GPU vLLM TEST DOUBLE of test_block_size_probe_cuda.py
and a TEST DOUBLE of ``journalctl`` (this machine runs no vLLM unit that could refuse; the molecule scenario's
rollback phase does that on a systemd host)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.mamba_clamp import MAMBA_SECTION, cache_key_of

# the fixture multi_gpu_vllm_double is used by name
from test_block_size_probe_cuda import multi_gpu_vllm_double, probe_tp2  # noqa: F401 pylint: disable=unused-import

INPUTS = {'gpu_memory_utilization': 0.6, 'max_model_len': 4096, 'kv_cache_dtype': 'auto',
          'mamba_cache_dtype': 'auto', 'mamba_ssm_cache_dtype': 'auto'}
REFUSAL = ("ValueError: max_num_seqs (256) exceeds available Mamba cache blocks (6). Each request requires one "
           "Mamba cache block, so at most 6 requests can run concurrently.")


@pytest.fixture
def journal(tmp_path, monkeypatch):
    """TEST DOUBLE of ``journalctl`` first on PATH: prints the file ``journal.txt`` and records its argv."""
    bindir = tmp_path / "journal-bin"
    bindir.mkdir()
    text, argv = tmp_path / "journal.txt", tmp_path / "journalctl.argv"
    script = bindir / "journalctl"
    script.write_text('#!/bin/sh\necho "$@" > %s\ncat %s\n' % (argv, text))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))

    class Journal(object):
        def says(self, *lines):
            text.write_text("\n".join(lines) + "\n")

        def argv(self):
            return argv.read_text().split()
    return Journal()


def _probe_n(d):
    """Probe N once (1056 on the double) so that the cache holds an entry of N."""
    return probe_tp2(d, mamba_inputs=INPUTS)


def test_a_refusal_in_the_journal_is_cached_beside_n_and_returned_with_it(multi_gpu_vllm_double, journal):
    d = multi_gpu_vllm_double
    probed = _probe_n(d)
    assert "mamba_blocks" not in probed and "vllm_mamba_blocks" not in probed["ansible_facts"]

    journal.says("INFO starting", REFUSAL, "vllm.service: Main process exited, code=exited, status=1/FAILURE")
    status, res = d.run(tensor_parallel_size=2, mamba_inputs=INPUTS, mamba_refusal=True, service_name="vllm")
    assert status == "ok" and res["changed"] and res["outcome"] == "refused", res
    assert res["mamba_refusal"] == {"max_num_seqs": 256, "mamba_cache_blocks": 6}
    assert res["ansible_facts"] == {"vllm_mamba_blocks": {"mamba_cache_blocks": 6, "source": "refusal"}}
    assert journal.argv()[:2] == ["-u", "vllm"] and d.launched() is None
    with open(d.cache) as handle:
        cache = json.load(handle)
    key = cache_key_of(res["service_fingerprint"], INPUTS)
    assert cache[MAMBA_SECTION][key]["mamba_cache_blocks"] == 6
    assert cache[MAMBA_SECTION][key]["refused_max_num_seqs"] == 256
    assert cache[probed["fingerprint"]]["vllm_block_size"] == 1056  # the entry of N stays

    # every later answer for the same inputs carries M, from the cache (launch=false too)
    for kw in ({}, {"launch": False}):
        status, res = d.run(tensor_parallel_size=2, mamba_inputs=INPUTS, **kw)
        assert status == "ok" and res["source"] == "cache", res
        assert res["ansible_facts"]["vllm_mamba_blocks"] == {"mamba_cache_blocks": 6, "source": "cached"}
    # other inputs that change M (the memory utilization): no M
    status, res = d.run(tensor_parallel_size=2, mamba_inputs=dict(INPUTS, gpu_memory_utilization=0.9))
    assert status == "ok" and "vllm_mamba_blocks" not in res["ansible_facts"], res
    assert d.launched() is None


def test_a_new_probe_of_n_keeps_the_recorded_m(multi_gpu_vllm_double, journal):
    d = multi_gpu_vllm_double
    journal.says(REFUSAL)
    status, res = d.run(tensor_parallel_size=2, mamba_inputs=INPUTS, mamba_refusal=True, service_name="vllm")
    assert status == "ok" and res["changed"], res
    probed = _probe_n(d)
    assert probed["source"] == "probe"
    assert probed["ansible_facts"]["vllm_mamba_blocks"] == {"mamba_cache_blocks": 6, "source": "cached"}


def test_a_failure_without_the_refusal_changes_nothing(multi_gpu_vllm_double, journal):
    d = multi_gpu_vllm_double
    journal.says("INFO starting", "RuntimeError: CUDA out of memory")
    status, res = d.run(tensor_parallel_size=2, mamba_inputs=INPUTS, mamba_refusal=True, service_name="vllm")
    assert status == "ok" and not res["changed"] and res["mamba_refusal"] is None, res
    assert res["outcome"] == "not_refused" and "ansible_facts" not in res
    assert "no refusal for the Mamba cache blocks in the journal of vllm" in res["reason"]
    assert not os.path.exists(d.cache) and d.launched() is None


def test_mamba_refusal_needs_the_service_and_the_inputs_of_m(multi_gpu_vllm_double, journal):
    d = multi_gpu_vllm_double
    journal.says(REFUSAL)
    status, res = d.run(tensor_parallel_size=2, mamba_refusal=True, service_name="vllm")
    assert status == "failed" and "mamba_inputs" in res["msg"], res
    assert not os.path.exists(d.cache)
