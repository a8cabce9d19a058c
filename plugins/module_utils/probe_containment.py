# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Containment of every process a probe starts, so that none survives it.

The module makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)`` through ctypes): a
descendant of the probe whose parent exits - a daemon that double-forks and calls ``setsid()`` to
leave the probe's session - is re-parented to the module instead of to init, so it stays in the
module's process tree. The probe's processes are then the module's descendants (less the watchdog
and any child the module had before the launch) plus the members of the launch's session, and the
module kills them until none is left and reaps the ones re-parented to it.

If the module itself is killed (SIGKILL), the watchdog - a small process of its own session that
remembers every contained process with its start time - kills them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36

# a process as /proc/<pid>/stat tells it (starttime in clock ticks since boot)
Proc = collections.namedtuple("Proc", ["pid", "state", "ppid", "pgid", "sid", "start"])


def become_subreaper():
    """Make this process the child subreaper of its descendants. True when it is (Linux)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, TypeError):
        return False


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (fields[0] is the state), or None when the
    process is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            st = f.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None
    return st[st.rfind(")") + 2:].split()


def read_proc(pid):
    """Proc of a pid, or None when it is gone."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return Proc(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def all_procs():
    """{pid: Proc} of every process, zombies included."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for d in names:
        if d.isdigit():
            p = read_proc(int(d))
            if p is not None:
                out[p.pid] = p
    return out


def subtree(root, procs):
    """root and its descendants in procs."""
    children = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    seen, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in procs:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, []))
    return seen


def contained(me, sid, excluded, procs):
    """The live (not zombie) processes of a probe: descendants of ``me`` (the subreaper) outside the
    trees of ``excluded`` pids, plus every member of the launch's session / process group ``sid``."""
    mine = subtree(me, procs) - {me}
    for pid in excluded:
        mine -= subtree(pid, procs)
    mine |= set(p.pid for p in procs.values() if sid is not None and (p.sid == sid or p.pgid == sid))
    return sorted(pid for pid in mine if procs[pid].state != "Z")


def reap_zombies(me, keep=()):
    """waitpid every zombie child of ``me`` (re-parented daemons) except the pids in ``keep``
    (children a Popen object waits for itself)."""
    for p in all_procs().values():
        if p.ppid == me and p.state == "Z" and p.pid not in keep:
            try:
                os.waitpid(p.pid, os.WNOHANG)
            except OSError:
                pass


def kill_contained(me, sid, excluded, keep=(), timeout=10.0, sleep=time.sleep):
    """SIGKILL every contained process until none is left or ``timeout`` passes; reap the zombies
    re-parented to ``me``. Returns the pids still alive (normally [])."""
    deadline = time.time() + timeout
    while True:
        left = contained(me, sid, excluded, all_procs())
        if sid is not None:
            try:
                os.killpg(sid, signal.SIGKILL)
            except OSError:
                pass
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reap_zombies(me, keep)
        if not left or time.time() > deadline:
            return left
        sleep(0.05)


# The watchdog: argv parent pid, session id, then pids whose trees are not the probe's. Every 0.5 s it
# remembers the contained processes with their start times; when the parent is gone it kills them
# (and whatever they started), checking the start time so that a reused pid is left alone.
WATCHDOG_SRC = r"""
import os, signal, sys, time
parent, sid = int(sys.argv[1]), int(sys.argv[2])
excluded = set(int(a) for a in sys.argv[3:]) | {os.getpid()}
def procs():
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % d, 'rb') as f:
                st = f.read().decode('utf-8', 'replace')
        except OSError:
            continue
        fl = st[st.rfind(')') + 2:].split()
        out[int(d)] = (fl[0], int(fl[1]), int(fl[2]), int(fl[3]), int(fl[19]))
    return out
def tree(roots, table):
    kids = {}
    for pid, p in table.items():
        kids.setdefault(p[1], []).append(pid)
    seen, stack = set(), list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        stack.extend(kids.get(pid, []))
    return seen
known = {}
def scan(table):
    mine = tree([parent], table) - {parent} - tree(excluded, table)
    mine |= set(pid for pid, p in table.items() if p[3] == sid or p[2] == sid)
    for pid in mine:
        if table[pid][0] != 'Z':
            known.setdefault(pid, table[pid][4])
    for pid in list(known):
        if pid not in table or table[pid][4] != known[pid]:
            del known[pid]
while True:
    table = procs()
    parent_gone = parent not in table or table[parent][0] == 'Z' or os.getppid() != parent
    scan(table)
    if not parent_gone:
        if not known and sid not in table:
            sys.exit(0)
        time.sleep(0.5)
        continue
    for _attempt in range(100):
        table = procs()
        scan(table)
        left = tree(list(known), table) | set(pid for pid, p in table.items() if p[3] == sid or p[2] == sid)
        left = [pid for pid in left if table[pid][0] != 'Z' and pid != os.getpid()]
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)
    sys.exit(0)
"""
