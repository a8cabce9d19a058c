# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU suite's cases and the harness's host-variable overrides (no GPU needed)."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import acceptance  # noqa: E402
import suite  # noqa: E402


def test_cases_set_only_venvs_and_utilization_and_never_max_num_seqs():
    for name in suite.DEFAULT_CASES.split(","):
        argv = suite.case_argv(name, "/opt/kit/venv", "o.json", "w", "l", "p/cache.fact")
        sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
        assert all(s.split("=")[0] in ("vllm_server_venv", "lmcache_server_venv",
                                       "vllm_server_gpu_memory_utilization") for s in sets)
        host_vars = acceptance.apply_overrides(acceptance.load_vars(argv[argv.index("--host-vars") + 1]), sets)
        assert "vllm_server_max_num_seqs" not in host_vars
        assert host_vars["vllm_server_venv"] == host_vars["lmcache_server_venv"] == "/opt/kit/venv"
        assert argv[argv.index("--probe-cache") + 1] == "p/cache.fact"
    gmus = {name: suite.CASES[name][2] for name in suite.CASES}
    assert gmus == {"27b-gmu0.6": 0.6, "27b-gmu0.5": 0.5, "27b-gmu0.9": 0.9, "0.8b": None}


def test_overrides_read_yaml_values_and_refuse_bare_keys():
    got = acceptance.apply_overrides({"a": 1}, ["b=0.5", "c=[1, 2]", "d=text"])
    assert got == {"a": 1, "b": 0.5, "c": [1, 2], "d": "text"}
    with pytest.raises(ValueError):
        acceptance.apply_overrides({}, ["novalue"])


def test_suite_without_a_gpu_writes_a_skipped_result_naming_the_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(acceptance.g, "cuda_device_present", lambda: False)
    out = tmp_path / "r.json"
    rc = suite.main(["--commit", "abc123", "--venv", "/v", "--out", str(out), "--logs", str(tmp_path / "l"),
                     "--cases", "0.8b"])
    res = json.loads(out.read_text())
    assert rc == 0 and res["commit"] == "abc123" and res["result"] == "skipped"
    assert res["summary"][0]["case"] == "0.8b"
    with pytest.raises(SystemExit):
        suite.main(["--commit", "x", "--venv", "/v", "--out", str(out), "--logs", "l", "--cases", "nope"])
