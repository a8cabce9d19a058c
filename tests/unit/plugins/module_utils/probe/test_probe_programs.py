# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two programs the probe runs from its own source (the engine launcher, the watchdog), and the
module's argument spec against its documentation."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import inspect
import os
import signal
import subprocess
import sys
import time

import yaml

from ansible_collections.lmcache_vllm.fleet.plugins.modules import block_size_probe
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import engine_launcher, watchdog
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.launch import engine_launcher_argv


def test_the_engine_launcher_source_compiles_and_is_what_the_argv_runs():
    source = inspect.getsource(engine_launcher)
    compile(source, "engine_launcher.py", "exec")
    argv = engine_launcher_argv(sys.executable, ["/v/bin/vllm", "serve", "/m", "--port", "1"])
    assert argv == [sys.executable, "-c", source, "/m"]


def test_the_engine_launcher_without_vllm_exits_3_unsupported():
    # this interpreter has no vLLM: the launcher says so and the module falls back to vllm serve
    argv = engine_launcher_argv(sys.executable, ["/v/bin/vllm", "serve", "/m"])
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
    assert proc.returncode == 3
    assert proc.stdout.decode().startswith(engine_launcher.UNSUPPORTED)


def test_the_watchdog_source_compiles():
    compile(inspect.getsource(watchdog), "watchdog.py", "exec")


def gone(pid):
    fields = watchdog.stat_fields(pid)
    return fields is None or fields[0] == "Z"


def test_the_watchdog_kills_the_session_of_a_killed_parent():
    # parent: a python that starts a sleeper in a session of its own and the watchdog, then waits
    parent_src = (
        "import subprocess, sys, time\n"
        "sleeper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
        "subprocess.Popen([sys.executable, '-c', sys.argv[1], str(__import__('os').getpid()), str(sleeper.pid)],"
        " start_new_session=True)\n"
        "print(sleeper.pid, flush=True)\n"
        "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", parent_src, inspect.getsource(watchdog)], stdout=subprocess.PIPE)
    sleeper = int(parent.stdout.readline())
    time.sleep(1.0)  # the watchdog has scanned at least once
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    try:
        while not gone(sleeper) and time.time() < deadline:
            time.sleep(0.1)
        assert gone(sleeper)
    finally:
        if not gone(sleeper):
            os.kill(sleeper, signal.SIGKILL)


def test_argument_spec_matches_the_documentation():
    options = yaml.safe_load(block_size_probe.DOCUMENTATION)["options"]
    spec = block_size_probe.argument_spec()
    assert sorted(spec) == sorted(options)
    for name, arg in spec.items():
        doc = options[name]
        assert arg.get("type", "str") == doc.get("type", "str"), name
        assert arg.get("default") == doc.get("default"), name
        assert bool(arg.get("required")) == bool(doc.get("required")), name
        assert arg.get("choices") == doc.get("choices"), name
        assert arg.get("elements") == doc.get("elements"), name
