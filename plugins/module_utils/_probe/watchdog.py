# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's watchdog, and the one reader of ``/proc/<pid>/stat``.

Run as a program of its own (``python -c <this file's source> PARENT SID [EXCLUDED...]``, see
process.ProbeProcess): every 0.5 s it remembers the probe's processes (descendants of PARENT outside the
trees of the EXCLUDED pids, and the members of session / process group SID) with their start times;
when PARENT is gone (the module was killed) it kills them and whatever they started, checking the
start time so that a reused pid is left alone. It uses the standard library only.

Imported, it gives process.py its /proc reader (:func:`stat_table`) and :func:`descendants`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import sys
import time


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (fields[0] is the state), or None when the
    process is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            st = f.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None
    return st[st.rfind(")") + 2:].split()


def stat_table():
    """{pid: stat fields} of every process, zombies included."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for d in names:
        if d.isdigit():
            fields = stat_fields(int(d))
            if fields is not None:
                out[int(d)] = fields
    return out


def descendants(roots, parents):
    """``roots`` and their descendants, from ``parents`` ({pid: ppid} of the live processes)."""
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    seen, stack = set(), list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in parents:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, []))
    return seen


def _session(table, sid):
    return set(pid for pid, fl in table.items() if int(fl[3]) == sid or int(fl[2]) == sid)


def _scan(table, parent, sid, excluded, known):
    """Remember the probe's live processes in ``known`` ({pid: start time}); forget the gone ones."""
    parents = dict((pid, int(fl[1])) for pid, fl in table.items())
    mine = descendants([parent], parents) - {parent} - descendants(excluded, parents)
    for pid in mine | _session(table, sid):
        if table[pid][0] != "Z":
            known.setdefault(pid, table[pid][19])
    for pid in list(known):
        if pid not in table or table[pid][19] != known[pid]:
            del known[pid]


def _kill_all(parent, sid, excluded, known):
    for _attempt in range(100):
        table = stat_table()
        _scan(table, parent, sid, excluded, known)
        parents = dict((pid, int(fl[1])) for pid, fl in table.items())
        left = descendants(list(known), parents) | _session(table, sid)
        left = [pid for pid in left if table[pid][0] != "Z" and pid != os.getpid()]
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)


def main(argv):
    parent, sid = int(argv[1]), int(argv[2])
    excluded = set(int(a) for a in argv[3:]) | {os.getpid()}
    known = {}
    while True:
        table = stat_table()
        parent_gone = parent not in table or table[parent][0] == "Z" or os.getppid() != parent
        _scan(table, parent, sid, excluded, known)
        if parent_gone:
            _kill_all(parent, sid, excluded, known)
            return 0
        if not known and sid not in table:
            return 0
        time.sleep(0.5)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
