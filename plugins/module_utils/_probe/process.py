# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's process: one launch in a session of its own, its /proc view, its containment, the
watchdog that covers a killed module, and the GPU memory plan of a launch beside a running service.

vLLM ignores SIGTERM while its engine initialises and its EngineCore / Worker / resource_tracker
children survive a SIGKILL of the main process. The only clean stop is SIGKILL of the whole process
group, so the probe runs vLLM in a new session and kills that group, then every process left in the
session, and waits until none is left.

The module makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)`` through ctypes): a
descendant of the probe whose parent exits - a daemon that double-forks and calls ``setsid()`` to
leave the probe's session - is re-parented to the module instead of to init, so it stays in the
module's process tree. The probe's processes are then the module's descendants (less the watchdog
and any child the module had before the launch) plus the members of the launch's session, and the
module kills them until none is left and reaps the ones re-parented to it. If the module itself is
killed (SIGKILL), the watchdog (watchdog.py, a process of its own session) kills them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import inspect
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_log import LogScanner
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import watchdog
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.errors import ProbeInterrupted
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.watchdog import descendants, stat_table

PR_SET_CHILD_SUBREAPER = 36
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

# a process as /proc/<pid>/stat tells it: start in clock ticks since boot, rss in bytes
Proc = collections.namedtuple("Proc", ["pid", "state", "ppid", "pgid", "sid", "start", "rss"])


# --------------------------------------------------------------------------
# /proc
# --------------------------------------------------------------------------

def _proc(pid, fields):
    return Proc(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]),
                int(fields[21]) * PAGE_SIZE)


def proc_stat(pid):
    """Proc of a live pid, or None (gone, or a zombie: already dead, waiting for its parent)."""
    fields = watchdog.stat_fields(pid)
    if not fields or fields[0] == "Z":
        return None
    return _proc(pid, fields)


def process_table(zombies=False):
    """{pid: Proc} of every process (zombies left out unless ``zombies``)."""
    return dict((pid, _proc(pid, fl)) for pid, fl in stat_table().items() if zombies or fl[0] != "Z")


def process_tree(root, table):
    """root and its descendants in table (a process_table())."""
    return descendants([root], dict((pid, p.ppid) for pid, p in table.items()))


def with_sessions(pids, table):
    """pids plus every process in table that shares a session with one of
    them, except the caller's own session (vLLM runs in a session of its own)."""
    pids = set(pids)
    sids = set(table[p].sid for p in pids if p in table) - {os.getsid(0)}
    return pids | set(pid for pid, st in table.items() if st.sid in sids)


def session_members(sid):
    """Live pids whose process group or session is sid."""
    return [pid for pid, st in process_table().items() if st.pgid == sid or st.sid == sid]


def kill_pids(pids):
    """SIGKILL every pid; one that is already gone is no error."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# --------------------------------------------------------------------------
# containment
# --------------------------------------------------------------------------

def become_subreaper():
    """Make this process the child subreaper of its descendants. True when it is (Linux)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, TypeError):
        return False


def contained(me, sid, excluded, procs):
    """The live (not zombie) processes of a probe: descendants of ``me`` (the subreaper; None: none)
    outside the trees of ``excluded`` pids, plus every member of the launch's session / process group
    ``sid``. ``procs``: a process_table(zombies=True)."""
    mine = set()
    if me is not None:
        mine = process_tree(me, procs) - {me}
        for pid in excluded:
            mine -= process_tree(pid, procs)
    mine |= set(p.pid for p in procs.values() if sid is not None and (p.sid == sid or p.pgid == sid))
    return sorted(pid for pid in mine if procs[pid].state != "Z")


def reap_zombies(me, keep=()):
    """waitpid every zombie child of ``me`` (re-parented daemons) except the pids in ``keep``
    (children a Popen object waits for itself)."""
    for p in process_table(zombies=True).values():
        if p.ppid == me and p.state == "Z" and p.pid not in keep:
            try:
                os.waitpid(p.pid, os.WNOHANG)
            except OSError:
                pass


def kill_contained(me, sid, excluded=(), keep=(), timeout=10.0, sleep=time.sleep):
    """SIGKILL every contained process until none is left or ``timeout`` passes; reap the zombies
    re-parented to ``me``. Returns the pids still alive (normally [])."""
    deadline = time.time() + timeout
    while True:
        left = contained(me, sid, excluded, process_table(zombies=True))
        if sid is not None:
            try:
                os.killpg(sid, signal.SIGKILL)
            except OSError:
                pass
        kill_pids(left)
        if me is not None:
            reap_zombies(me, keep)
        if not left or time.time() > deadline:
            return left
        sleep(0.05)


def kill_session(sid, timeout=10.0):
    """SIGKILL the process group sid and every process left in session sid; wait until none is
    alive. Returns the pids still alive (normally [])."""
    return kill_contained(None, sid, timeout=timeout)


def free_port(host="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, 0))
        return s.getsockname()[1]
    finally:
        s.close()


# --------------------------------------------------------------------------
# GPU memory: room for a probe beside a running service, and its release
# --------------------------------------------------------------------------

# memory vLLM's own CUDA context and allocator take before its free-memory check (MiB)
GPU_MEMORY_MARGIN_MIB = 1024


def gpu_memory_plan(gpus, utilization, min_utilization=0.05, fit=True, margin_mib=GPU_MEMORY_MARGIN_MIB):
    """The --gpu-memory-utilization of a probe on ``gpus`` (the GPUs it will use, as
    ``hardware.gpu_inventory()`` gives them with their used memory), pure.

    vLLM refuses to start when a GPU's free memory is below ``utilization`` x its total. When
    every GPU has room (free - margin >= utilization x total) the value is kept. Otherwise, with
    ``fit``, it is lowered to what the fullest GPU leaves (two decimals, rounded down) if that is
    at least ``min_utilization``: a (shrunken) probe beside a running service. Else the plan
    fails: the probe must then run after the service has stopped.

    Returns a dict: ``utilization`` (the value to pass, or None when the probe cannot run),
    ``requested``, ``lowered`` (bool), ``gpus`` (index, total, used and free MiB, MiB needed),
    ``reason``."""
    rows, fractions = [], []
    unknown = []
    for g in gpus:
        total, used = g.get("memory_total_mib"), g.get("memory_used_mib")
        if not total or used is None:
            unknown.append(g.get("index"))
            continue
        free = max(0, total - used)
        rows.append({"index": g.get("index"), "name": g.get("name"), "total_mib": total, "used_mib": used,
                     "free_mib": free, "needed_mib": int(round(utilization * total))})
        fractions.append(max(0.0, float(free - margin_mib)) / total)
    plan = {"requested": utilization, "utilization": utilization, "lowered": False, "gpus": rows}
    if not rows or min(fractions) >= utilization:
        plan["reason"] = ("every GPU has room for gpu_memory_utilization=%s" % utilization if rows else
                          "nvidia-smi reports no used memory for GPUs %s: not checked" % unknown)
        return plan
    tight = min(rows, key=lambda r: float(r["free_mib"]) / r["total_mib"])
    room = int(min(fractions) * 100) / 100.0
    what = ("GPU %s (%s) has %d MiB free of %d MiB (%d MiB used by other processes, %d MiB kept for "
            "vLLM's CUDA context)" % (tight["index"], tight["name"], tight["free_mib"], tight["total_mib"],
                                      tight["used_mib"], margin_mib))
    if fit and room >= min_utilization:
        plan.update(utilization=room, lowered=True,
                    reason="%s: lowered the probe's gpu_memory_utilization from %s to %s to run beside "
                           "them (N does not depend on it)" % (what, utilization, room))
        return plan
    plan["utilization"] = None
    if fit:
        plan["reason"] = ("%s: not even min_gpu_memory_utilization=%s fits beside the processes using "
                          "the GPUs. Re-probe inside the host's rolling batch, after its vLLM service has "
                          "stopped" % (what, min_utilization))
    else:
        plan["reason"] = ("%s: gpu_memory_utilization=%s does not fit and fit_gpu_memory=false. Lower "
                          "gpu_memory_utilization, or re-probe inside the host's rolling batch, after its "
                          "vLLM service has stopped" % (what, utilization))
    return plan


def wait_gpu_release(pids, query_apps, timeout, poll=0.5, clock=time.time, sleep=time.sleep):
    """Wait until none of ``pids`` holds GPU memory. ``query_apps()`` returns the processes that
    hold GPU memory (``hardware.compute_apps``). Returns (held, waited seconds): ``held`` lists
    the apps of ``pids`` still holding memory after ``timeout`` seconds ([] when released)."""
    pids = set(int(p) for p in pids)
    start = clock()
    while True:
        held = [a for a in query_apps() if a["pid"] in pids]
        if not held or clock() - start >= timeout:
            return held, clock() - start
        sleep(poll)


LOG_CHUNK = 1024 * 1024
LOG_CHUNKS_PER_POLL = 64


def read_some(reader, scanner, chunk_size=LOG_CHUNK, max_chunks=LOG_CHUNKS_PER_POLL):
    """Feed the scanner what the log has grown by, in bounded chunks (at most ``max_chunks`` per
    call, so that a flooding process cannot keep the probe from checking its deadline)."""
    for _i in range(max_chunks):
        chunk = reader.read(chunk_size)
        if not chunk:
            return
        scanner.feed(chunk)


# one launch's outcome: status found | ready | failed | exited | timeout; the LogScanner; seconds
# until the outcome and until the first block size line (or None); vLLM's exit status (or None)
ProbeResult = collections.namedtuple("ProbeResult", ["status", "scanner", "elapsed", "line_elapsed", "returncode"])


class ProbeProcess(object):
    """One vLLM probe launch. Use as a context manager: __exit__ always kills
    the session, even on exceptions."""

    def __init__(self, argv, env, log_path=None, cwd=None, watchdog=True, identity=None, kill_timeout=10.0):
        """``identity``: a :func:`user_identity` dict to run vLLM as that user (uid, gid and
        supplementary groups); None runs it as the module's user. Without ``log_path`` the log
        is a file in a private directory (0700), unlinked as soon as it is open."""
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.identity = identity
        self.kill_timeout = kill_timeout
        self.proc = None
        self.sid = None
        self.watchdog = None
        self.use_watchdog = watchdog
        self._own_log = log_path is None
        self.log_path = log_path
        self._log_fh = None
        self.reader = None
        self.subreaper = False
        self.excluded = []
        self._old_handlers = {}
        self.leftover = []
        self.seen_pids = set()

    # signals -> exception, so that `finally` blocks run
    def _on_signal(self, signum, _frame):
        raise ProbeInterrupted(signum)

    def _install_signals(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError):
                pass  # not the main thread

    def _restore_signals(self):
        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old)
            except (ValueError, OSError):
                pass
        self._old_handlers = {}

    def __enter__(self):
        self._install_signals()
        try:
            self.start()
        except Exception:
            self.stop()
            self._restore_signals()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.stop()
        finally:
            self._restore_signals()
        return False

    def _open_log(self):
        """(writer, reader) of the log. Without log_path it is a file in a private directory (0700)
        that is unlinked, with its directory, right after both ends are open: a killed module leaves
        no log behind."""
        if not self._own_log:
            log_dir = os.path.dirname(os.path.abspath(self.log_path))
            if not os.path.isdir(log_dir):
                os.makedirs(log_dir, 0o755)
            # a symlink at log_path is refused (ELOOP), not followed and truncated as root
            nofollow = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
            writer = os.fdopen(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | nofollow, 0o600), "wb")
            return writer, os.fdopen(os.open(self.log_path, os.O_RDONLY | nofollow), "rb")
        private = tempfile.mkdtemp(prefix="vllm-block-size-probe.")
        path = os.path.join(private, "vllm.log")
        try:
            writer = open(path, "wb")
            reader = open(path, "rb")
        finally:
            shutil.rmtree(private, ignore_errors=True)
        return writer, reader

    def start(self):
        self._log_fh, self.reader = self._open_log()
        kwargs = {}
        ident = self.identity
        if ident is not None and (ident["uid"] != os.geteuid() or ident["gid"] != os.getegid()):
            kwargs.update(user=ident["uid"], group=ident["gid"], extra_groups=list(ident["groups"]))
        # daemons that leave the session are re-parented to this process (become_subreaper)
        self.subreaper = become_subreaper()
        me = os.getpid()
        self.excluded = [p.pid for p in process_table(zombies=True).values() if p.ppid == me]
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self._log_fh, stderr=subprocess.STDOUT,
            env=self.env, cwd=self.cwd, start_new_session=True, close_fds=True, **kwargs
        )
        self.sid = self.proc.pid
        self.seen_pids.add(self.sid)
        if self.use_watchdog:
            try:
                self.watchdog = subprocess.Popen(
                    [sys.executable, "-c", inspect.getsource(watchdog), str(me), str(self.sid)] + [str(p) for p in self.excluded],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    close_fds=True, start_new_session=True,
                )
            except (OSError, ValueError):
                self.watchdog = None

    def _excluded(self):
        return self.excluded + ([self.watchdog.pid] if self.watchdog is not None else [])

    def members(self):
        """The live processes of the probe: the session's members and every descendant of this
        process outside the watchdog and the children it had before the launch."""
        if self.sid is None:
            return []
        return contained(os.getpid(), self.sid, self._excluded(), process_table(zombies=True))

    def note_members(self):
        """Remember every process of the probe seen now (for the GPU memory wait)."""
        self.seen_pids.update(self.members())

    def stop(self):
        """Kill every process of the probe; reap; stop the watchdog. Idempotent."""
        leftover = []
        if self.sid is not None:
            self.note_members()
            keep = [self.proc.pid] + ([self.watchdog.pid] if self.watchdog is not None else [])
            leftover = kill_contained(os.getpid(), self.sid, self._excluded(), keep=keep,
                                      timeout=self.kill_timeout)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except Exception:
                pass
        if self.watchdog is not None:
            try:
                self.watchdog.kill()
            except OSError:
                pass
            try:
                self.watchdog.wait(timeout=5)
            except Exception:
                pass
            self.watchdog = None
        for fh in (self._log_fh, self.reader):
            if fh is not None:
                try:
                    fh.close()
                except Exception:
                    pass
        self._log_fh = self.reader = None
        self.leftover = leftover
        return leftover

    def wait_for_block_size(self, timeout, expected_ranks=1, poll=0.2, failed_grace=3.0,
                            settle_grace=1.0, clock=time.time):
        """Follow the log until the block size is known, vLLM is ready, fails,
        exits, or timeout seconds pass. Returns a ProbeResult (the process is
        still alive; call stop()).

        Every rank has logged N but none a later line yet: vLLM may set N again in
        the same call (the padding line and a second alignment follow at once), so
        the probe waits up to ``settle_grace`` seconds for a later line before it
        takes the last N logged."""
        scanner = LogScanner()
        start = clock()
        deadline = start + float(timeout)
        failed_at = None
        found_at = None
        line_elapsed = None
        last_note = start
        reader = self.reader
        while True:
            read_some(reader, scanner)
            if scanner.block_lines and line_elapsed is None:
                line_elapsed = clock() - start
            state = scanner.state(expected_ranks)
            rc = self.proc.poll()
            if state is None and rc is None and scanner.reported(expected_ranks):
                if found_at is None or found_at[1] != len(scanner.block_lines):
                    found_at = (clock(), len(scanner.block_lines))  # from the last record on
                if clock() - found_at[0] < settle_grace and clock() < deadline:
                    time.sleep(min(poll, 0.05))
                    continue
                state = "found"
            if state in ("found", "ready"):
                return ProbeResult(state, scanner, clock() - start, line_elapsed, rc)
            if rc is not None:
                read_some(reader, scanner)
                scanner.flush()
                state = scanner.state(expected_ranks)
                status = state if state in ("found", "ready") else "exited"
                if status != "found" and scanner.block_lines:
                    status = "found"  # some ranks reported before the exit
                return ProbeResult(status, scanner, clock() - start, line_elapsed, rc)
            if state == "failed":
                if failed_at is None:
                    failed_at = clock()
                elif clock() - failed_at >= failed_grace:
                    scanner.flush()
                    return ProbeResult("failed", scanner, clock() - start, None, None)
            if clock() >= deadline:
                scanner.flush()
                return ProbeResult("timeout", scanner, clock() - start, line_elapsed, None)
            if clock() - last_note >= 1.0:
                self.note_members()
                last_note = clock()
            time.sleep(poll)
