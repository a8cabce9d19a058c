# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The harness's metric reader and prompt maker (no GPU needed)."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpulib  # noqa: E402

METRICS = """\
# HELP vllm:external_prefix_cache_hits_total External prefix cache hits
# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 3264.0
vllm:num_requests_running{engine="0",model_name="m"} 6.0
lmcache_mp_lookup_hit_tokens_total{cache_salt="",model_name="a"} 544.0
lmcache_mp_lookup_hit_tokens_total{cache_salt="",model_name="b"} 2720.0
lmcache_mp_l1_write_chunks 12.0
"""


def test_metrics_sum_over_labels_and_suffix():
    m = gpulib.parse_metrics(METRICS)
    assert gpulib.metric(m, "vllm:external_prefix_cache_hits_total") == 3264.0
    assert gpulib.metric(m, "lmcache_mp_lookup_hit_tokens_total") == 3264.0
    assert gpulib.metric(m, "lmcache_mp_l1_write_chunks_total") == 12.0
    assert gpulib.metric(m, "vllm:num_requests_running") == 6.0
    assert gpulib.metric(m, "absent_total") == 0.0


def test_prompt_is_deterministic_and_sized():
    a = gpulib.prompt_text(3445, seed=1)
    assert a == gpulib.prompt_text(3445, seed=1) != gpulib.prompt_text(3445, seed=2)
    assert len(a) == 3445 and a.isascii()


def test_periodic_sampler_keeps_the_tuples_read():
    values = iter([(1, 2), None, (3, 4)])
    sampler = gpulib.PeriodicSampler(lambda: next(values, None), 0.01)
    sampler.start()
    deadline = time.monotonic() + 5
    while len(sampler.samples) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert [s[1:] for s in sampler.samples] == [(1, 2), (3, 4)]
    assert sampler.samples[0][0] <= sampler.samples[1][0]


def test_gpu_memory_through_the_nvidia_smi_double(monkeypatch):
    """gpulib reads nvidia-smi with the collection's reader; here nvidia-smi is the TEST DOUBLE."""
    double = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "doubles", "nvidia-smi-double")
    real_runner = gpulib.subprocess_runner

    def runner(timeout):
        run = real_runner(timeout)
        return lambda argv: run([double] + list(argv[1:]))

    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "synthetic-h200x2")
    monkeypatch.delenv("FLEET_FAKE_NVIDIA_SMI_HOLD_PIDS_FILE", raising=False)
    monkeypatch.setattr(gpulib, "subprocess_runner", runner)
    assert gpulib.gpu_memory_used_mib() == [1, 52350]
    assert gpulib.gpu_apps() == []
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "no-driver")
    assert gpulib.gpu_memory_used_mib() == []
