# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers of the GPU acceptance harness and the GPU benchmarks (no pytest).

Processes are started in their own session so that one signal to the process group stops vLLM's
API server, engine core and workers together. GPU memory is read with ``nvidia-smi`` and metrics
from ``/metrics``, both through the collection's own readers (``hardware``, ``prometheus_text``):
this checkout is exposed as the collection by ``tests/fleet_collection.py``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import string
import subprocess
import threading
import time
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fleet_collection import expose_collection  # noqa: E402  # pylint: disable=wrong-import-position

expose_collection()

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import prometheus_text  # noqa: E402
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import (  # noqa: E402
    GpuQueryError,
    compute_apps,
    gpu_inventory,
    subprocess_runner,
)


def write_result(path, res):
    """Write a case's result as JSON to ``path`` (its directory made); True, printed, when the case was skipped."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(res, fh, indent=1)
    if "skipped" in res:
        print("SKIPPED: " + res["skipped"])
        return True
    return False


def cuda_device_present():
    """True when nvidia-smi lists at least one GPU."""
    if not shutil.which("nvidia-smi"):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU " in out.stdout


def http(method, url, body=None, timeout=10.0):
    """(status, text) of one request; status 0 when the server cannot be reached."""
    data = None
    headers = {}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return 0, str(exc)


def wait_http(url, timeout, procs=(), interval=1.0):
    """Wait until GET url answers 200; False on timeout or when one of procs exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = http("GET", url, timeout=5)[0]
        if status == 200:
            return True
        if any(p.poll() is not None for p in procs):
            return False
        time.sleep(interval)
    return False


def parse_metrics(text):
    """Prometheus text -> {name: sum of the samples over all label sets}."""
    out = {}
    for name, _labels, value in prometheus_text.parse(text):
        out[name] = out.get(name, 0.0) + value
    return out


def scrape(url):
    status, text = http("GET", url, timeout=10)
    return parse_metrics(text) if status == 200 else {}


def metric(metrics, *names):
    """First of names present in metrics (prometheus_client may add or drop the _total suffix)."""
    for name in names:
        for candidate in (name, name[:-6] if name.endswith("_total") else name + "_total"):
            if candidate in metrics:
                return metrics[candidate]
    return 0.0


def start(argv, env, log_path, cwd=None):
    """Start argv in a new session with exactly env, output to log_path."""
    log = open(log_path, "ab", buffering=0)
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    proc.log_path = log_path
    proc._log = log
    return proc


def children(pid):
    """Every descendant pid of pid (from /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        cur = todo.pop()
        for kid in parents.get(cur, []):
            out.append(kid)
            todo.append(kid)
    return out


def session_pids(sid):
    """Every pid whose session id is sid."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                pids.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def stop(proc, timeout=30.0):
    """SIGTERM the process group, then SIGKILL whatever of the session is left; returns leftovers."""
    if proc is None:
        return []
    sid = proc.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(sid, sig)
        except ProcessLookupError:
            pass
        for pid in session_pids(sid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (timeout if sig == signal.SIGTERM else 10)
        while time.monotonic() < deadline:
            proc.poll()
            if proc.returncode is not None and not session_pids(sid):
                break
            time.sleep(0.2)
        else:
            continue
        break
    proc.poll()
    try:
        proc._log.close()
    except (AttributeError, OSError):
        pass
    return session_pids(sid)


def gpu_memory_used_mib():
    """memory.used of every GPU in MiB (list), [] without nvidia-smi."""
    try:
        gpus = gpu_inventory(subprocess_runner(timeout=20), fields=("index", "memory.used"))
    except GpuQueryError:
        return []
    return [gpu["memory_used_mib"] for gpu in gpus if gpu["memory_used_mib"] is not None]


def gpu_apps():
    """[(pid, used MiB)] of the compute processes nvidia-smi lists."""
    try:
        apps = compute_apps(subprocess_runner(timeout=20))
    except GpuQueryError:
        return []
    return [(app["pid"], app["used_memory_mib"]) for app in apps if app["used_memory_mib"] is not None]


class PeriodicSampler(threading.Thread):
    """Calls ``read()`` every ``interval`` seconds until :meth:`stop`; ``read`` returns a tuple of values
    or None. ``samples``: ``(seconds since the start, value, ...)`` for every tuple read."""

    def __init__(self, read, interval=0.25):
        super().__init__(daemon=True)
        self.read = read
        self.interval = interval
        self.samples = []
        self._halt = threading.Event()

    def run(self):
        t0 = time.monotonic()
        while not self._halt.is_set():
            values = self.read()
            if values is not None:
                self.samples.append((round(time.monotonic() - t0, 2),) + tuple(values))
            self._halt.wait(self.interval)

    def stop(self):
        self._halt.set()
        self.join(timeout=30)
        return self


def _gpu0_used():
    used = gpu_memory_used_mib()
    return (used[0],) if used else None


class GpuSampler(PeriodicSampler):
    """Samples GPU 0's memory.used every interval seconds; peak and samples in MiB."""

    def __init__(self, interval=0.25):
        super().__init__(_gpu0_used, interval)

    @property
    def peak(self):
        return max((s[1] for s in self.samples), default=0)


def wait_gpu_released(baseline_mib, timeout=60.0, slack_mib=1024):
    """Wait until GPU 0 is back within slack of baseline; returns the last reading."""
    deadline = time.monotonic() + timeout
    used = gpu_memory_used_mib()
    while time.monotonic() < deadline:
        used = gpu_memory_used_mib()
        if used and used[0] <= baseline_mib + slack_mib:
            return used[0]
        time.sleep(1)
    return used[0] if used else None


def prompt_text(n_tokens, seed):
    """A deterministic prompt of about n_tokens tokens for the byte-level fixture tokenizer
    (one byte = one token) and a few times fewer for a real BPE tokenizer."""
    rnd = random.Random(seed)
    words = []
    size = 0
    while size < n_tokens:
        w = "".join(rnd.choice(string.ascii_lowercase) for dummy in range(rnd.randint(2, 9)))
        words.append(w)
        size += len(w) + 1
    return " ".join(words)[:n_tokens]


def completion(base, model, prompt, max_tokens=16, timeout=300, **extra):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "logprobs": 1, "seed": 0}
    body.update(extra)
    t0 = time.monotonic()
    status, text = http("POST", base + "/v1/completions", body, timeout=timeout)
    dt = time.monotonic() - t0
    try:
        data = json.loads(text)
    except ValueError:
        data = {"raw": text[:2000]}
    return status, data, dt


def tail(path, n=60):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 200000))
            lines = fh.read().decode("utf-8", "replace").splitlines()
        return lines[-n:]
    except OSError:
        return []


def pyspy_dump(pids, out_path, pyspy="py-spy"):
    """Append py-spy stack dumps of pids to out_path (best effort)."""
    exe = shutil.which(pyspy) or pyspy
    with open(out_path, "a") as fh:
        for pid in pids:
            fh.write(f"===== py-spy dump pid {pid}\n")
            fh.flush()
            try:
                subprocess.run([exe, "dump", "--pid", str(pid)], stdout=fh, stderr=subprocess.STDOUT,
                               timeout=30, check=False)
            except (OSError, subprocess.SubprocessError) as exc:
                fh.write(f"py-spy failed: {exc}\n")
