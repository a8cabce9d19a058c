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
    assert gmus == {"27b-gmu0.6": 0.6, "27b-gmu0.5": 0.5, "27b-gmu0.9": 0.9, "0.8b": None, "l2-27b": 0.6,
                    "l2-0.8b": None, "p2p-27b": 0.6, "p2p-27b-tcp": 0.6}


def test_l2_cases_run_after_the_acceptance_case_of_their_model_on_its_units():
    order = suite.DEFAULT_CASES.split(",")
    for l2, acc_case in (("l2-27b", "27b-gmu0.6"), ("l2-0.8b", "0.8b")):
        assert order.index(acc_case) < order.index(l2)
        assert suite.CASES[l2] == suite.CASES[acc_case]
    assert order[0] == "27b-gmu0.6"
    argv = suite.l2_argv("l2-27b", "/opt/kit/venv", "o.json", "w", "l", "p/c.fact", "/k/l2/redis/redis-server")
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    assert sorted(s.split("=")[0] for s in sets) == ["lmcache_server_kv_request_timeout", "lmcache_server_venv",
                                                     "vllm_server_gpu_memory_utilization", "vllm_server_venv"]
    args = suite.l2case.parser().parse_args(argv)
    assert args.redis_server == "/k/l2/redis/redis-server" and args.multiples == [1, 4] and args.budget == suite.L2_BUDGET["l2-27b"]
    assert args.device == "cuda" and args.lengths == [8101, 15941] and args.probe_cache == "p/c.fact"


def test_overrides_read_yaml_values_and_refuse_bare_keys():
    got = acceptance.apply_overrides({"a": 1}, ["b=0.5", "c=[1, 2]", "d=text"])
    assert got == {"a": 1, "b": 0.5, "c": [1, 2], "d": "text"}
    with pytest.raises(ValueError):
        acceptance.apply_overrides({}, ["novalue"])


@pytest.mark.parametrize("case", ["0.8b", "l2-0.8b"])
def test_suite_without_a_gpu_writes_a_skipped_result_naming_the_commit(tmp_path, monkeypatch, case):
    monkeypatch.setattr(acceptance.g, "cuda_device_present", lambda: False)
    out = tmp_path / "r.json"
    rc = suite.main(["--commit", "abc123", "--venv", "/v", "--out", str(out), "--logs", str(tmp_path / "l"),
                     "--cases", case])
    res = json.loads(out.read_text())
    assert rc == 0 and res["commit"] == "abc123" and res["result"] == "skipped"
    assert res["summary"][0]["case"] == case
    assert "skipped" in res["cases"][case]
    with pytest.raises(SystemExit):
        suite.main(["--commit", "x", "--venv", "/v", "--out", str(out), "--logs", "l", "--cases", "nope"])


def test_p2p_cases_give_server_a_an_l1_that_holds_every_prompt_and_report_the_first_transfer():
    for name, tls in (("p2p-27b", None), ("p2p-27b-tcp", "tcp,cuda_copy")):
        argv = suite.case_argv(name, "/v", "o", "w", "l", "p") + suite.P2P_ARGS[name]
        args = suite.p2pcase.parser().parse_args(argv)
        host_vars = acceptance.apply_overrides(acceptance.load_vars(args.host_vars), args.set)
        assert host_vars["lmcache_server_l1_size_gb"] == 16
        assert (args.ucx_tls or None) == tls
    res = {"result": "pass", "summary": [], "checks": {"a": True},
           "p2p_first_transfer": {"prompt_tokens": 15941, "ttft_s": 2.5, "hit_tokens": 15680, "label": "p2p_first"}}
    line = suite.p2p_summary("p2p-27b", res)
    assert line["first_transfer"] == {"prompt_tokens": 15941, "ttft_s": 2.5, "hit_tokens": 15680}
    empty = {"prompt_tokens": None, "ttft_s": None, "hit_tokens": None}
    assert suite.p2p_summary("p2p-27b", {})["first_transfer"] == empty


def test_a_shorter_run_names_fewer_chunk_multiples_for_one_l2_case():
    env = {"GPU_KIT_L2_MULTIPLES": "l2-0.8b=1"}
    assert suite.l2_multiples("l2-0.8b", env) == "1"
    assert suite.l2_multiples("l2-27b", env) == suite.L2_MULTIPLES["l2-27b"] == "1,4"
    assert suite.l2_multiples("l2-27b", {}) == "1,4"
    with pytest.raises(ValueError, match="GPU_KIT_L2_MULTIPLES: l2-27b='1,x'"):
        suite.l2_multiples("l2-27b", {"GPU_KIT_L2_MULTIPLES": "l2-27b=1,x"})
