# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Take N from a running vLLM service's own start-up log (the systemd journal).

A host that already serves the model with the same N-relevant inputs has
printed the block size line when its unit started. Reading it back from the
journal launches nothing, which matters most where a probe cannot run at all
(the accelerator memory is taken by the service).

The service's side of the contract: next to its unit, a file holds the
*service fingerprint* (``fingerprint.service_fingerprint``) of the inputs the
unit runs with, and the file is written **before** the unit is (re)started
with them. The journal is trusted only when

* the unit is loaded and running (active, or still activating) with a main process,
* the recorded fingerprint equals the one computed for this run,
* the file is not newer than the start of the unit's main process (a file
  rewritten without a restart does not describe the running process),
* the log of the unit's current invocation (``_SYSTEMD_INVOCATION_ID``) gives
  one consistent N (every tensor-parallel rank agrees) or shows a server that
  became ready without the line, and names the same vLLM version.

Everything but :func:`service_block_size` and :func:`read_journal_head` (which run
systemctl and journalctl) is pure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import tempfile
import time

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_log import (
    LogScanner,
    ProbeError,
    block_size_decision,
    reporting_ranks,
    scan_text,
)

DEFAULT_FINGERPRINT_DIR = "/etc/lmcache-vllm-fleet"
FINGERPRINT_SUFFIX = ".fingerprint"
SHOW_PROPERTIES = ("LoadState", "ActiveState", "SubState", "InvocationID", "MainPID",
                   "ExecMainStartTimestampMonotonic", "ActiveEnterTimestampMonotonic")
RUNNING_STATES = ("active", "activating", "reloading")
# tolerance of the file-mtime / unit-start comparison (clock conversion only)
START_SLACK_S = 0.5
# journal lines read at most (the start-up log comes first; vLLM logs ~100 lines to the line)
JOURNAL_MAX_LINES = 20000
HEX64_RE = re.compile(r"^[0-9a-f]{64}$")
VERSION_RES = (
    re.compile(r"Initializing a V1 LLM engine \(v([^)\s]+)\)"),
    re.compile(r"vLLM API server version (\S+)"),
)
UNIT_SUFFIX_RE = re.compile(r"\.(service|scope|target|socket|mount|timer|path|slice|device|swap)$")


def unit_name(service_name):
    """``vllm`` -> ``vllm.service``; names with a unit suffix are kept."""
    name = (service_name or "").strip()
    if name and not UNIT_SUFFIX_RE.search(name):
        name += ".service"
    return name


def default_fingerprint_file(service_name, directory=DEFAULT_FINGERPRINT_DIR):
    """``/etc/lmcache-vllm-fleet/<name>.fingerprint`` for unit ``<name>.service``."""
    base = unit_name(service_name)
    if base.endswith(".service"):
        base = base[:-len(".service")]
    return os.path.join(directory, base + FINGERPRINT_SUFFIX)


def parse_systemctl_show(text):
    """``Key=Value`` lines of ``systemctl show`` as a dict."""
    props = {}
    for line in (text or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


def parse_fingerprint_file(text):
    """The service fingerprint recorded in a file, or None.

    The file holds the 64 hex digits (surrounding whitespace ignored), or a
    JSON object with a ``service_fingerprint`` key (other keys, e.g. the
    inputs, are for people)."""
    text = (text or "").strip()
    if HEX64_RE.match(text):
        return text
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):
        value = str(data.get("service_fingerprint") or "").strip()
        if HEX64_RE.match(value):
            return value
    return None


def _int(value, default=0):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def unit_started_at(props, now_real, now_mono):
    """Wall-clock (epoch seconds) start of the unit's main process, or None.

    systemd reports CLOCK_MONOTONIC microseconds; converting through the
    current clocks needs no date parsing and no timezone."""
    mono_us = _int(props.get("ExecMainStartTimestampMonotonic"))
    if mono_us <= 0:
        mono_us = _int(props.get("ActiveEnterTimestampMonotonic"))
    if mono_us <= 0:
        return None
    return now_real - (now_mono - mono_us / 1e6)


def check_service(unit, props, recorded, expected, file_mtime, started_at, fingerprint_file):
    """(True, reason) when the running unit was started with the inputs of
    this run, else (False, why not)."""
    if props.get("LoadState") not in (None, "loaded"):
        return False, "unit %s is not loaded (%s)" % (unit, props.get("LoadState"))
    state = props.get("ActiveState", "unknown")
    if state not in RUNNING_STATES:
        return False, "unit %s is %s" % (unit, state)
    if _int(props.get("MainPID")) <= 0:
        return False, "unit %s has no main process" % unit
    if not props.get("InvocationID"):
        return False, "unit %s has no invocation id (systemd too old?)" % unit
    if recorded is None:
        return False, "no service fingerprint recorded in %s" % fingerprint_file
    if recorded != expected:
        return False, ("unit %s was started with other inputs (recorded fingerprint %s, this run %s)"
                       % (unit, recorded[:12], expected[:12]))
    if started_at is None:
        return False, "start time of unit %s unknown" % unit
    if file_mtime is not None and file_mtime > started_at + START_SLACK_S:
        return False, ("%s was written after unit %s started: the running process may predate "
                       "these inputs (its journal is used after the next restart)"
                       % (fingerprint_file, unit))
    return True, "unit %s runs with the same inputs" % unit


def _base_version(version):
    return str(version or "").split("+", 1)[0].lstrip("v")


def logged_versions(text):
    """vLLM versions the log names (engine config line, API server line)."""
    found = []
    for regex in VERSION_RES:
        found.extend(regex.findall(text or ""))
    return found


def journal_block_size(text, expected_ranks=1, requested=None, platform="cuda", vllm_version=None):
    """(result, reason) from the journal text of one start of the service.

    result is None when the log does not settle N (still starting, failed,
    ranks disagree, another vLLM version); reason says why."""
    if not (text or "").strip():
        return None, "the journal has no lines for the unit's current start (rotated away, or no permission)"
    scanner = scan_text(text)
    if vllm_version:
        for ver in logged_versions(scanner.text):
            if _base_version(ver) != _base_version(vllm_version):
                return None, ("the service runs vLLM %s, the venv has %s (not restarted since the "
                              "upgrade)" % (ver, vllm_version))
    state = scanner.state(expected_ranks)
    if state == "failed":
        return None, "the service's journal shows that its engine failed to start"
    if state not in ("found", "ready"):
        if scanner.reported(expected_ranks):
            return None, ("the service's journal ends at its block size record (vLLM may set N again at once): "
                          "not settled yet")
        if scanner.block_lines:
            return None, ("the service's journal has the block size from %d of %d ranks so far"
                          % (len(reporting_ranks(scanner.block_lines)), expected_ranks))
        return None, "the service has not logged the attention block size (yet)"
    try:
        result = block_size_decision(scanner, state, expected_ranks=expected_ranks,
                                     requested=requested, platform=platform, vllm_version=vllm_version)
    except ProbeError as e:
        return None, "the service's journal does not settle N: %s" % e
    result["reason"] = "%s (read from the running service's journal)" % result["reason"]
    return result, result["reason"]


def read_until_settled(stream, expected_ranks=1, max_lines=JOURNAL_MAX_LINES, deadline=None,
                       clock=time.time):
    """Read lines (bytes) from stream only until the start-up log settles N:
    every rank reported (or the engine moved on after a report), or the server
    is ready without the line; at most max_lines lines. Returns (text, stopped)."""
    scanner = LogScanner()
    lines = []
    for raw in stream:
        lines.append(raw)
        scanner.feed(raw)
        if scanner.ready or (scanner.block_lines and scanner.state(expected_ranks) == "found") \
                or len(lines) >= max_lines or (deadline is not None and clock() > deadline):
            return b"".join(lines).decode("utf-8", "replace"), True
    return b"".join(lines).decode("utf-8", "replace"), False


def read_journal_head(argv, expected_ranks=1, max_lines=JOURNAL_MAX_LINES, timeout=120):
    """Run journalctl (argv) and read its output with read_until_settled: a unit
    that has served for weeks has a long journal, and the start-up lines come
    first. Returns (rc, text, stderr); rc is 0 when the reading stopped early
    on purpose."""
    errf = tempfile.TemporaryFile()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errf)
    except (IOError, OSError):
        errf.close()
        raise
    try:
        text, stopped = read_until_settled(proc.stdout, expected_ranks, max_lines,
                                           deadline=time.time() + timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        rc = proc.wait()
        errf.seek(0)
        err = errf.read().decode("utf-8", "replace")
        errf.close()
    return (0 if stopped else rc), text, err


def service_block_size(run, read_journal, service_name, fingerprint_file, expected, expected_ranks=1,
                       requested=None, platform="cuda", vllm_version=None,
                       clock=time.time, monotonic=time.monotonic):
    """N from the journal of the running unit ``service_name``.

    run(argv) -> (rc, stdout, stderr) runs a command (systemctl);
    read_journal(argv, expected_ranks) -> (rc, text, stderr) reads journalctl's
    output (read_journal_head). Either raises OSError when the command is missing.
    Returns (result or None, info); info describes the unit and why its
    journal was or was not used (key ``reason``)."""
    unit = unit_name(service_name)
    info = {"unit": unit, "fingerprint_file": fingerprint_file, "used": False}

    def no(reason):
        info["reason"] = reason
        return None, info

    try:
        with open(fingerprint_file, "r") as f:
            recorded = parse_fingerprint_file(f.read())
        file_mtime = os.stat(fingerprint_file).st_mtime
    except (IOError, OSError):
        recorded, file_mtime = None, None
    info["recorded_fingerprint"] = recorded
    if recorded is None:
        return no("no service fingerprint recorded in %s" % fingerprint_file)
    if recorded != expected:
        return no("unit %s was started with other inputs (recorded fingerprint %s, this run %s)"
                  % (unit, recorded[:12], expected[:12]))
    try:
        rc, out, err = run(["systemctl", "show", unit, "--property=" + ",".join(SHOW_PROPERTIES)])
    except (IOError, OSError) as e:
        return no("cannot run systemctl: %s" % e)
    if rc != 0:
        return no("systemctl show %s failed (rc %s): %s" % (unit, rc, (err or out or "").strip()[:200]))
    props = parse_systemctl_show(out)
    started_at = unit_started_at(props, clock(), monotonic())
    info.update(active_state=props.get("ActiveState"), invocation_id=props.get("InvocationID") or None,
                main_pid=_int(props.get("MainPID")) or None)
    ok, why = check_service(unit, props, recorded, expected, file_mtime, started_at, fingerprint_file)
    if not ok:
        return no(why)
    argv = ["journalctl", "_SYSTEMD_INVOCATION_ID=" + props["InvocationID"], "-b", "--no-pager",
            "-q", "-o", "cat"]
    try:
        rc, out, err = read_journal(argv, expected_ranks)
    except (IOError, OSError) as e:
        return no("cannot run journalctl: %s" % e)
    if rc != 0:
        return no("journalctl failed (rc %s): %s" % (rc, (err or out or "").strip()[:200]))
    result, why = journal_block_size(out, expected_ranks=expected_ranks, requested=requested,
                                     platform=platform, vllm_version=vllm_version)
    if result is None:
        if (err or "").strip() and not (out or "").strip():
            why = "%s: %s" % (why, err.strip().splitlines()[0][:200])
        return no(why)
    info.update(used=True, reason=why)
    return result, info
