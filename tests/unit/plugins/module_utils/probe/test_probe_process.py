# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of the probe's process helpers in _probe/process.py (/proc reading, process tree, killing)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess
import sys
import time

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.process import (
    Proc,
    kill_pids,
    kill_session,
    proc_stat,
    process_table,
    process_tree,
    session_members,
    with_sessions,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
NO_SUCH_PID = 2 ** 22 + 12345


def _wait(pred, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def test_proc_stat_of_this_process():
    st = proc_stat(os.getpid())
    assert st == Proc(os.getpid(), "R", os.getppid(), os.getpgrp(), os.getsid(0), st.start, st.rss)
    assert st.rss > 1024 * 1024


def test_proc_stat_of_a_gone_pid_and_of_a_zombie():
    assert proc_stat(NO_SUCH_PID) is None
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        def is_zombie():
            with open("/proc/%d/stat" % child.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        assert _wait(is_zombie)
        assert proc_stat(child.pid) is None
        assert child.pid not in process_table()
    finally:
        child.wait()


def test_process_table_has_this_process():
    table = process_table()
    assert table[os.getpid()].ppid == os.getppid()
    assert NO_SUCH_PID not in table


def proc(pid, ppid, pgid, sid):
    return Proc(pid, "S", ppid, pgid, sid, 0, 0)


def test_process_tree_and_with_sessions():
    own = os.getsid(0)
    table = {
        10: proc(10, 1, 10, own),    # root, in the caller's session
        11: proc(11, 10, 11, 11),    # child in a session of its own
        12: proc(12, 11, 11, 11),    # grandchild
        13: proc(13, 1, 11, 11),     # re-parented member of the child's session
        20: proc(20, 1, 20, own),    # unrelated, in the caller's session
        30: proc(30, 1, 30, 30),     # unrelated session
    }
    assert process_tree(10, table) == {10, 11, 12}
    assert process_tree(11, table) == {11, 12}
    assert process_tree(99, table) == set()
    assert with_sessions(process_tree(10, table), table) == {10, 11, 12, 13}
    assert with_sessions([20], table) == {20}
    assert with_sessions(iter([30, 99]), table) == {30, 99}


def test_kill_pids():
    child = subprocess.Popen(SLEEPER)
    try:
        kill_pids([NO_SUCH_PID, child.pid])
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_session_members_and_kill_session():
    leader = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                               "time.sleep(60)"], start_new_session=True)
    try:
        assert _wait(lambda: len(session_members(leader.pid)) == 2)
        assert leader.pid in session_members(leader.pid)
        assert kill_session(leader.pid) == []
        assert leader.wait(timeout=10) == -signal.SIGKILL
        assert session_members(leader.pid) == []
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait()
