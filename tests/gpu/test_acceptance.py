# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""pytest entry of the GPU acceptance harness: skipped where no CUDA device exists.

    FLEET_GPU_HOST_VARS=tests/gpu/h200-host-vars.yml python -m pytest tests/gpu
"""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import acceptance  # noqa: E402
import gpulib  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(not gpulib.cuda_device_present(), reason="no CUDA device")
@pytest.mark.skipif(not os.environ.get("FLEET_GPU_HOST_VARS"), reason="FLEET_GPU_HOST_VARS not set")
@pytest.mark.parametrize("model", ["qwen3.5-0.8b"])
def test_units_serve_with_lmcache_hits(tmp_path, model):
    out = tmp_path / "acceptance.json"
    rc = acceptance.main(["--model-dir", os.path.join(REPO, "tests", "fixtures", "models", model),
                          "--host-vars", os.environ["FLEET_GPU_HOST_VARS"], "--out", str(out),
                          "--workdir", str(tmp_path / "work")])
    res = json.loads(out.read_text())
    assert rc == 0, json.dumps({k: res.get(k) for k in ("checks", "error", "reason")}, indent=1)


def test_log_facts_read_the_recorded_27b_log():
    log = os.path.join(REPO, "benchmarks", "results", "gpu-clamp-27b-20261201T1510-logs", "vllm-gmu060.log")
    facts = acceptance.log_facts(log)
    assert facts == {"weights_gib": "50.22", "kv_cache_memory_gib": "29.99", "kv_cache_tokens": "379866",
                     "block_size": "784"}
    assert acceptance.log_facts(os.path.join(REPO, "no-such-log")) == {}
