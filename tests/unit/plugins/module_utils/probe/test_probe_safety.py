# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe (_probe/): cache validation and lock, GPU memory plan and release wait, the engine
launcher's command line, the service user's identity and environment."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import multiprocessing
import os
import pwd
import time

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_log import (
    block_size_decision,
    scan_text,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import (
    FINGERPRINT_VERSION,
    compute_fingerprint,
    fingerprint_inputs,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import (
    CACHE_SCHEMA,
    CacheLock,
    load_cache,
    store_cache,
    validate_entry,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.errors import CacheLockTimeout
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.launch import engine_launcher_argv
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.process import (
    ProbeProcess,
    gpu_memory_plan,
    wait_gpu_release,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.request import (
    service_base_env,
    user_identity,
)

INPUTS = fingerprint_inputs({"kind": "hub", "id": "m", "revision": "main"}, "0.32.0",
                            hardware={"kind": "cpu", "machine": "x86_64", "cpu_model": "AMD EPYC", "isa": ["avx2"]})
KEY = compute_fingerprint(INPUTS)


def entry(**kw):
    e = {"vllm_block_size": 640, "inputs": json.loads(json.dumps(INPUTS)), "schema": CACHE_SCHEMA}
    e.update(kw)
    return e


def check(e, key=KEY):
    return validate_entry(key, e, FINGERPRINT_VERSION, compute_fingerprint)


def test_valid_entry():
    assert check(entry()) is None


@pytest.mark.parametrize("e, words", [
    ("text", "not a mapping"),
    (entry(vllm_block_size=-1), "positive integer"),
    (entry(vllm_block_size=1.5), "positive integer"),
    (entry(vllm_block_size=None), "positive integer"),
    (entry(schema=None), "unknown schema"),
    (entry(inputs=None), "no fingerprint inputs"),
])
def test_invalid_entries(e, words):
    assert words in check(e)


def test_entry_under_another_key_is_foreign():
    assert "is stored under" in check(entry(), key="f" * 64)


def test_other_hardware_is_another_fingerprint():
    other = dict(INPUTS, hardware=dict(INPUTS["hardware"], isa=["avx2", "avx512f"]))
    assert compute_fingerprint(other) != KEY


def test_older_fingerprint_version_is_stale():
    old = entry()
    old["inputs"]["fingerprint_version"] = FINGERPRINT_VERSION - 1
    assert check(old) == "stale"


def test_load_cache_warns_and_keeps_good_ones(tmp_path):
    path = str(tmp_path / "c.fact")
    stale = entry()
    stale["inputs"]["fingerprint_version"] = 1
    with open(path, "w") as f:
        json.dump({KEY: entry(), "a" * 64: entry(vllm_block_size=0), "b" * 64: stale}, f)
    warnings = []
    cache = load_cache(path, FINGERPRINT_VERSION, compute_fingerprint, warnings)
    assert list(cache) == [KEY]
    assert len(warnings) == 1 and "aaaaaaaaaaaa" in warnings[0] and "probed again" in warnings[0]


@pytest.mark.parametrize("content, words", [("{", "not valid JSON"), ("[1]", "not a mapping")])
def test_load_cache_unparsable_file(tmp_path, content, words):
    path = str(tmp_path / "c.fact")
    with open(path, "w") as f:
        f.write(content)
    warnings = []
    assert load_cache(path, warnings=warnings) == {}
    assert words in warnings[0]


def test_store_cache_uses_the_mover_and_cleans_up(tmp_path):
    path = str(tmp_path / "c.fact")
    moves = []

    def mover(src, dest):
        moves.append((os.path.dirname(src), dest))
        os.rename(src, dest)
    store_cache(path, {}, KEY, entry(), mover=mover)
    assert moves == [(str(tmp_path), path)]
    with open(path) as f:
        assert json.load(f)[KEY]["schema"] == CACHE_SCHEMA

    def broken(src, dest):
        raise OSError("disk full")
    with pytest.raises(OSError):
        store_cache(path, {}, KEY, entry(), mover=broken)
    assert sorted(os.listdir(str(tmp_path))) == ["c.fact"]


def _hold_lock(path, ready, release):
    with CacheLock(path):
        ready.set()
        release.wait(10)


def test_cache_lock_excludes_another_process(tmp_path):
    path = str(tmp_path / "facts.d" / "c.fact")
    ready, release = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold_lock, args=(path, ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        t0 = time.time()
        with pytest.raises(CacheLockTimeout, match="another block size probe holds"):
            with CacheLock(path, timeout=0.5):
                pass
        assert time.time() - t0 >= 0.5
    finally:
        release.set()
        holder.join(10)
    with CacheLock(path, timeout=5) as lock:
        assert lock.waited < 5
    assert os.path.exists(path + ".lock") and not os.path.exists(path)


H200 = [{"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771, "memory_used_mib": 1},
        {"index": 1, "name": "NVIDIA H200", "memory_total_mib": 143771, "memory_used_mib": 0}]


def test_gpu_plan_idle_gpus_keep_the_value():
    plan = gpu_memory_plan(H200, 0.3)
    assert plan["utilization"] == 0.3 and plan["lowered"] is False
    assert plan["gpus"][0]["needed_mib"] == 43131 and plan["gpus"][0]["free_mib"] == 143770


def test_gpu_plan_beside_a_service_lowers_to_the_fullest_gpu():
    busy = [dict(H200[0], memory_used_mib=100000), dict(H200[1], memory_used_mib=125000)]
    plan = gpu_memory_plan(busy, 0.3)
    # GPU 1: 18771 free - 1024 margin = 17747 MiB = 0.1234 -> 0.12
    assert plan["utilization"] == 0.12 and plan["lowered"] is True
    assert "GPU 1 (NVIDIA H200) has 18771 MiB free of 143771 MiB" in plan["reason"]


def test_gpu_plan_no_room_says_rolling_batch():
    full = [dict(H200[0], memory_used_mib=140000)]
    plan = gpu_memory_plan(full, 0.3, min_utilization=0.05)
    assert plan["utilization"] is None
    assert "rolling batch" in plan["reason"] and "min_gpu_memory_utilization=0.05" in plan["reason"]
    plan = gpu_memory_plan([dict(H200[0], memory_used_mib=120000)], 0.3, fit=False)
    assert plan["utilization"] is None and "fit_gpu_memory=false" in plan["reason"]


def test_gpu_plan_unknown_used_memory_is_not_checked():
    plan = gpu_memory_plan([dict(H200[0], memory_used_mib=None)], 0.3)
    assert plan["utilization"] == 0.3 and "not checked" in plan["reason"]


class FakeClock(object):
    """Test double of time.time / time.sleep."""

    def __init__(self):
        self.now = 0.0

    def time(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_wait_gpu_release_until_gone():
    clock = FakeClock()
    answers = [[{"pid": 7, "used_memory_mib": 10}, {"pid": 99, "used_memory_mib": 5}]] * 3 + [[{"pid": 99, "used_memory_mib": 5}]]
    calls = []

    def apps():
        calls.append(1)
        return answers[min(len(calls) - 1, len(answers) - 1)]
    held, waited = wait_gpu_release([7, 8], apps, 10, poll=0.5, clock=clock.time, sleep=clock.sleep)
    assert held == [] and waited == 1.5 and len(calls) == 4


def test_wait_gpu_release_times_out_with_the_holders():
    clock = FakeClock()
    held, waited = wait_gpu_release([7], lambda: [{"pid": 7, "used_memory_mib": 10}], 2, poll=0.5,
                                    clock=clock.time, sleep=clock.sleep)
    assert held == [{"pid": 7, "used_memory_mib": 10}] and waited == 2


def test_engine_launcher_argv_keeps_the_serve_flags():
    serve = ["/v/bin/vllm", "serve", "/m", "--load-format", "dummy", "--host", "127.0.0.1", "--port", "9",
             "--port=10", "--block-size", "32"]
    argv = engine_launcher_argv("/v/bin/python", serve)
    assert argv[:2] == ["/v/bin/python", "-c"] and "executor.get_class(config)" in argv[2]
    assert argv[3:] == ["/m", "--load-format", "dummy", "--block-size", "32"]
    with pytest.raises(ValueError):
        engine_launcher_argv("/v/bin/python", ["/v/bin/vllm", "bench"])


def test_engine_built_line_decides_a_ready_engine():
    scanner = scan_text("fleet-probe: engine built: block_size=128 hybrid=False after 9.0 s\n")
    assert scanner.state() == "ready"
    out = block_size_decision(scanner, "ready", platform="cpu")
    assert out["vllm_block_size"] == 128 and out["outcome"] == "not_hybrid" and "engine config" in out["reason"]
    scanner = scan_text("fleet-probe: engine built: block_size=1024 hybrid=True after 9.0 s\n")
    assert block_size_decision(scanner, "ready", requested=1024)["outcome"] == "block_size_sufficient"


def test_user_identity_and_base_env():
    me = pwd.getpwuid(os.geteuid())
    ident = user_identity(me.pw_name)
    assert ident["uid"] == me.pw_uid and ident["gid"] == me.pw_gid and me.pw_gid in ident["groups"]
    assert user_identity(str(me.pw_uid))["name"] == me.pw_name
    assert user_identity(None) is None
    with pytest.raises(KeyError, match="does not exist"):
        user_identity("fleet-no-such-user")
    with pytest.raises(KeyError, match="group fleet-no-such-group"):
        user_identity(me.pw_name, "fleet-no-such-group")
    env = service_base_env(ident, {"LANG": "C.UTF-8", "HOME": "/elsewhere", "HF_TOKEN": "secret"})
    assert env["HOME"] == me.pw_dir and env["LANG"] == "C.UTF-8" and "HF_TOKEN" not in env


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_probe_process_runs_as_the_user(tmp_path):
    nobody = user_identity("nobody")
    proc = ProbeProcess(["/bin/sh", "-c", "id -u; id -g; pwd"], {"PATH": "/usr/bin:/bin"},
                        identity=nobody, cwd="/", watchdog=False)
    with proc:
        proc.proc.wait(10)
        # the log was unlinked as soon as it was opened: nothing of it is left in a directory
        assert os.fstat(proc.reader.fileno()).st_nlink == 0
        proc.reader.seek(0)
        uid, gid, cwd = proc.reader.read().decode().split()
    assert (int(uid), int(gid), cwd) == (nobody["uid"], nobody["gid"], "/")


def test_probe_process_remembers_its_pids():
    proc = ProbeProcess(["/bin/sh", "-c", "sleep 30 & sleep 30"], dict(os.environ), watchdog=False)
    with proc:
        time.sleep(0.3)
        proc.note_members()
        assert len(proc.seen_pids) >= 2
    assert proc.leftover == []
