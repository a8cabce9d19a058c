# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where N comes from, in order: the cache, the journal of the running service, and a launch (check mode
stops before the launch). Each source returns an answer (the module's result) or None; the first answer
wins. The launch falls back from the shrunken to the full model and from the engine launcher to
``vllm serve`` inside itself. Only the launch source starts a process (through process.ProbeProcess)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import datetime
import os
import time
import traceback

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_journal import (
    default_fingerprint_file,
    read_journal_head,
    service_block_size,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_log import (
    ProbeError,
    block_size_decision,
    find_error_tail,
    summarize_error,
    usage_error,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import GpuQueryError, compute_apps
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import CACHED_KEYS
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.errors import ProbeFailed
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.launch import (
    build_probe_argv,
    engine_launcher_argv,
    shown_argv,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.process import (
    ProbeProcess,
    free_port,
    gpu_memory_plan,
    wait_gpu_release,
)

LAUNCHERS = {"auto": ("engine", "serve"), "engine": ("engine",), "serve": ("serve",)}


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@contextlib.contextmanager
def cache_held(req):
    """The cache loaded for the sources, under its lock (check mode reads it without the lock)."""
    if req.check_mode:
        _load(req)
        yield
        return
    with req.cache.locked(req.p["lock_timeout"]) as lock:
        req.base["lock_waited_s"] = round(lock.waited, 3)
        _load(req)
        yield


def _load(req):
    warnings = req.cache.load()
    if warnings:
        req.base["cache_warnings"] = warnings


def first_answer(req):
    """The answer of the first source that has one (with ``expected``: the cache and the journal only)."""
    sources = (from_cache, from_journal)
    if not req.p["expected"]:
        sources += (no_launch, from_launch)
    with cache_held(req):
        for source in sources:
            answer = source(req)
            if answer is not None:
                return answer
    return None


# --------------------------------------------------------------------------
# the cache and the journal
# --------------------------------------------------------------------------

def from_cache(req):
    """The cache entry of the request's fingerprint (not with force)."""
    hit = req.cache.get(req.fingerprint)
    if not hit or req.p["force"]:
        return None
    res = dict(req.base)
    res.update(dict((k, hit[k]) for k in CACHED_KEYS if k in hit))
    res.update(source="cache", changed=False, cache_file=req.p["cache_path"])
    return res


def store(req, entry):
    """Store an answer in the cache (not in check mode); True when written."""
    return False if req.check_mode else req.cache.store(entry)


def from_journal(req):
    """N from the start-up log of the running service, when it serves the same inputs."""
    p = req.p
    if not p["service_name"] or p["force"]:
        return None
    fp_file = p["service_fingerprint_file"] or default_fingerprint_file(p["service_name"])

    def read_journal(argv, ranks):
        return read_journal_head(req.host.argv(argv), expected_ranks=ranks)
    found, info = service_block_size(
        req.host.run, read_journal, p["service_name"], fp_file, req.base["service_fingerprint"],
        expected_ranks=p["tensor_parallel_size"], requested=p["block_size"], platform=req.platform,
        vllm_version=req.version)
    req.base["journal"] = info
    if not found:
        req.journal_note = info["reason"]
        return None
    entry = dict(req.base)
    entry.update(found)
    entry.update(probed_at=utcnow(), cmd=None, journal={"unit": info["unit"], "invocation_id": info.get("invocation_id")})
    changed = store(req, entry)
    entry.update(source="journal", changed=changed, cache_file=p["cache_path"], journal=info)
    return entry


def no_launch(req):
    """Check mode and ``launch=false`` launch nothing: the reason a probe would run."""
    if req.p["launch"] and not req.check_mode:
        return None
    hit = req.cache.get(req.fingerprint)
    why = "force=true" if hit else "no cached block size for fingerprint %s" % req.fingerprint[:12]
    if req.journal_note:
        why += "; journal of %s not used: %s" % (req.p["service_name"], req.journal_note)
    return dict(req.base, outcome="skipped", skipped=True, reason="%s; a probe would launch vLLM (%s)" % (
        why, "not in check mode" if req.check_mode else "launch=false"))


# --------------------------------------------------------------------------
# the launch
# --------------------------------------------------------------------------

def retry_full_model(probe_mode, outcome, log_text=""):
    """A shrunken launch that vLLM refused is tried once more with the real
    layout. A timeout or disagreeing ranks would only repeat, and so would a
    command line that vLLM's argument parser refuses (unless it refuses the
    shrink's own --hf-overrides)."""
    if probe_mode != "shrunk" or outcome != "vllm_failed":
        return False
    refused, flag = usage_error(log_text)
    return not refused or flag == "--hf-overrides"


def fall_back_to_serve(launcher, outcome, log_text=""):
    """After a failed engine launch the plain ``vllm serve`` is tried; not when the ranks
    disagreed (that is vLLM's answer, not the launcher's), not after a timeout (``vllm serve``
    starts more slowly still: it would only double the wait), and not when vLLM's own argument
    parser refused the command line (``vllm serve`` parses it with the same parser)."""
    if launcher != "engine" or outcome in ("ranks_disagree", "timeout"):
        return False
    return not usage_error(log_text)[0]


def from_launch(req):
    """N from a throw-away vLLM: the shrunken model, then (when vLLM refused it) the full one, whose
    fingerprint may already be in the cache. Always answers, or raises ProbeFailed."""
    launch = Launch(req)
    try:
        try:
            out = launch.run(req.hf_overrides)
        except ProbeFailed as e:
            if not retry_full_model(req.probe_mode, e.result.get("outcome"), e.result.get("log_tail", "")):
                raise
            req.use_mode("full", "shrunken probe failed (%s); probed the full model" % e.msg)
            hit = from_cache(req)
            if hit is not None:
                return hit
            out = launch.run(None)
    except ProbeFailed as e:
        e.result.update(launch.shown())
        raise
    except Exception as e:  # keep the message; the finally blocks already killed vLLM
        raise ProbeFailed("probe error: %s" % e, outcome="error", exception=traceback.format_exc(), **launch.shown())
    entry = dict(req.base)
    entry.update(out)
    entry.update(launch.shown())
    entry.update(probed_at=utcnow(), fingerprint=req.fingerprint)
    changed = store(req, entry)
    entry.update(source="probe", changed=changed, cache_file=req.p["cache_path"])
    return entry


class Launch(object):
    """The launches of one probe: the GPU memory plan, then each launcher in turn."""

    def __init__(self, req):
        self.req = req
        self.fallbacks = []
        self.argv = self.serve_argv = self.launcher = None
        self.utilization, self.gpu_apps = gpu_plan(req)
        identity = req.identity
        self.cwd = None
        if identity is not None:
            self.cwd = identity["home"] if os.path.isdir(identity["home"]) else "/"

    def serve_argv_for(self, overrides):
        p, req = self.req.p, self.req
        extra = (["--revision", p["revision"]] if p["revision"] else []) + list(req.extra_args)
        return build_probe_argv(
            req.vllm, p["model"], p["port"] or free_port(), extra_args=extra, max_model_len=p["max_model_len"],
            gpu_memory_utilization=self.utilization, max_num_batched_tokens=p["max_num_batched_tokens"],
            language_model_only=p["language_model_only"], skip_tokenizer_init=req.skip_tokenizer_init,
            hf_overrides=overrides, **req.n_values)

    def run(self, overrides):
        """Each launcher in turn (the engine launcher, then vllm serve); returns the result of
        the first that gives N or raises the last ProbeFailed."""
        launchers = LAUNCHERS[self.req.p["launcher"]]
        last = None
        for i, kind in enumerate(launchers):
            serve_argv = self.serve_argv_for(overrides)
            if kind == "engine" and not self.req.python:
                self.fallbacks.append("engine launcher: no python next to %s" % self.req.vllm)
                continue
            argv = engine_launcher_argv(self.req.python, serve_argv) if kind == "engine" else serve_argv
            self.argv, self.launcher, self.serve_argv = argv, kind, serve_argv
            try:
                return run_one_probe(self.req, argv, self.cwd, self.gpu_apps)
            except ProbeFailed as e:
                last = e
                more = i + 1 < len(launchers)
                if not (more and fall_back_to_serve(kind, e.result.get("outcome"), e.result.get("log_tail", ""))):
                    raise
                self.fallbacks.append("engine launcher: %s" % e.msg)
        if last is not None:
            raise last
        raise ProbeFailed("no launcher could run: %s" % "; ".join(self.fallbacks), outcome="error")

    def shown(self):
        """The command lines of the last launch, its fallbacks and log for the result."""
        out = {"cmd": self.serve_argv or self.argv, "launcher": self.launcher}
        if self.argv is not None:
            out["launch_cmd"] = shown_argv(self.argv)
        if self.fallbacks:
            out["launcher_fallback"] = list(self.fallbacks)
        if self.req.p["log_path"]:
            out["log_path"] = self.req.p["log_path"]
        return out


def gpu_plan(req):
    """(the probe's --gpu-memory-utilization, the GPU process query or None) on this host's GPUs."""
    p = req.p
    if req.gpus is None:
        return p["gpu_memory_utilization"], None
    plan = gpu_memory_plan(req.gpus, p["gpu_memory_utilization"], min_utilization=p["min_gpu_memory_utilization"],
                           fit=p["fit_gpu_memory"])
    req.base["gpu_memory"] = plan
    if plan["utilization"] is None:
        raise ProbeFailed(plan["reason"], outcome="no_gpu_memory")
    if plan["lowered"]:
        req.module.warn(plan["reason"])

    def gpu_apps():
        return compute_apps(req.module.run_command, nvidia_smi=req.host.nvidia_smi)
    return plan["utilization"], gpu_apps


def run_one_probe(req, argv, cwd=None, gpu_apps=None):
    """Launch once; returns a dict (outcome etc.) or raises ProbeFailed.

    Returns only after every process of the launch's session has exited and, with ``gpu_apps``
    (a callable giving the processes that hold GPU memory), none of them holds GPU memory."""
    p = req.p
    proc = ProbeProcess(argv, req.env, log_path=p["log_path"], identity=req.identity, cwd=cwd,
                        kill_timeout=max(1.0, float(p["release_timeout"])))
    with proc:
        res = proc.wait_for_block_size(p["timeout"], expected_ranks=p["tensor_parallel_size"])
    text = res.scanner.text
    out = {"probe_elapsed_s": round(res.elapsed, 3)}
    if res.line_elapsed is not None:
        out["line_elapsed_s"] = round(res.line_elapsed, 3)
    if res.scanner.padding_pct is not None:
        out["padding_pct"] = res.scanner.padding_pct
    check_released(proc, gpu_apps, p["release_timeout"], text, out)
    if res.status not in ("found", "ready"):
        raise launch_failure(res, text, p["timeout"], out)
    try:
        out.update(block_size_decision(res.scanner, res.status, expected_ranks=p["tensor_parallel_size"],
                                       requested=p["block_size"], platform=req.platform,
                                       vllm_version=req.version))
    except ProbeError as e:
        raise ProbeFailed(str(e), outcome=e.outcome, reports=e.reports, log_tail=find_error_tail(text))
    return out


def check_released(proc, gpu_apps, release_timeout, text, out):
    """ProbeFailed when a process of the launch is alive, or (``gpu_apps``) holds GPU memory, after
    ``release_timeout`` seconds; notes the GPU release time in ``out``."""
    if proc.leftover:
        raise ProbeFailed("vLLM processes %s of the probe were still alive release_timeout=%s s "
                          "after SIGKILL" % (proc.leftover, release_timeout),
                          outcome="error", log_tail=find_error_tail(text))
    if gpu_apps is None:
        return
    started = time.time()
    try:
        held, _waited = wait_gpu_release(proc.seen_pids, gpu_apps, float(release_timeout))
    except GpuQueryError as e:
        raise ProbeFailed("cannot tell whether the probe released its GPU memory: %s" % e,
                          outcome="error", log_tail=find_error_tail(text))
    out["gpu_release_s"] = round(time.time() - started, 3)
    if held:
        raise ProbeFailed(
            "GPU memory still held by processes of the probe after release_timeout=%s s: %s"
            % (release_timeout, ", ".join("pid %d (%s MiB)" % (a["pid"], a["used_memory_mib"]) for a in held)),
            outcome="error", held_gpu_memory=held, log_tail=find_error_tail(text))


def launch_failure(res, text, timeout, out):
    """The ProbeFailed of a launch that gave no N (timeout, exit, failed engine)."""
    tail = find_error_tail(text)
    if res.status == "timeout":
        return ProbeFailed("vLLM did not log the attention block size within timeout=%s s; the probe killed "
                           "its process group" % timeout, outcome="timeout", log_tail=tail, **out)
    summary = summarize_error(text) or "no error message in its log"
    if res.status == "exited":
        msg = "vLLM exited with rc %s before logging the attention block size: %s" % (res.returncode, summary)
    else:
        msg = "vLLM failed to start its engine before logging the attention block size: %s" % summary
    return ProbeFailed(msg, outcome="vllm_failed", log_tail=tail, **out)
