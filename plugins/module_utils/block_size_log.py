# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse vLLM's log output for the unified hybrid block size (pure, no I/O).

vLLM prints, in the process that aligns the attention block size with the
Mamba / Gated-DeltaNet state page::

    (EngineCore pid=187) INFO 05-01 17:08:53 [interface.py:606] Setting attention
    block size to 1568 tokens to ensure that attention page size is >= mamba page size.

The process prefix and the ``file:line`` part move between vLLM versions, so
the parser matches the message text only, on ANSI-stripped lines.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import re

SET_BLOCK_RE = re.compile(r"Setting attention block size to (\d+) tokens")
PADDING_RE = re.compile(r"Padding mamba page size by ([0-9.]+)%")
# "(EngineCore pid=187) ", "(Worker_TP1 pid=9) ", "(VllmWorker-0 pid=3) " ...
PREFIX_RE = re.compile(r"^\((?P<proc>[A-Za-z0-9_.:-]+) pid=(?P<pid>\d+)\)\s*")
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
TP_RANK_RE = re.compile(r"(?:^|_)(?:DP(?P<dp>\d+)_)?(?:PP(?P<pp>\d+)_)?TP(?P<tp>\d+)(?:_|$)")

# The engine is serving: every block size decision has been taken.
READY_RE = re.compile(r"Application startup complete|Starting vLLM API server")
# Lines the engine prints after the block size decision (KV cache sizing and
# later): once one appears, every rank that would print the line has done so.
MOVED_ON_RE = re.compile(
    r"Available KV cache memory|KV cache size:|Maximum concurrency for"
    r"|init engine \(profile|kv lcm block sizes|Application startup complete"
    r"|Starting vLLM API server|Graph capturing finished"
)
# vLLM gave up while starting (the front-end may linger a moment after this).
ENGINE_FAILED_RE = re.compile(
    r"EngineCore failed to start|Engine core initialization failed"
    r"|Engine process failed to start|WorkerProc failed to start"
)
# Signs that the model has Mamba / linear-attention state (hybrid).
HYBRID_HINT_RE = re.compile(
    r"Padding mamba page size|Mamba cache mode is set|Prefix caching in Mamba cache"
    r"|mamba_block_size|Hybrid or mamba-based model"
)
# The probe's engine launcher built vLLM's engine (probe_runner.ENGINE_LAUNCHER_SRC): every
# block size decision has been taken; block_size is the engine config's, hybrid its is_hybrid.
ENGINE_BUILT_RE = re.compile(r"^fleet-probe: engine built: block_size=(\d+) hybrid=(True|False)")
# Block size as vLLM reports it elsewhere, when it does not print the line.
KV_BACKEND_BLOCK_RE = re.compile(r"Setting kv cache block size to (\d+) for")
NON_DEFAULT_BLOCK_RE = re.compile(r"non-default args:.*?['\"]block_size['\"]\s*:\s*(\d+)")
CONFIG_BLOCK_RE = re.compile(r"\bblock_size=(\d+)")
CACHE_INFO_BLOCK_RE = re.compile(r"cache_config_info\{[^}]*block_size=\"(\d+)\"")

# A Python exception line: "ValueError: ...", "torch.OutOfMemoryError: ...",
# "AssertionError" (bare), "RuntimeError: Engine core initialization failed".
EXC_LINE_RE = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt)"
    r"(?::\s.*|:?\s*)$"
)
GENERIC_FAILURE_RE = re.compile(
    r"See root cause above|Engine core initialization failed|EngineCore failed to start"
    r"|WorkerProc initialization failed|Worker failed with error"
)
ERROR_LEVEL_RE = re.compile(r"^(?:ERROR|CRITICAL)\b|\bERROR \d\d-\d\d ")
TRACEBACK_RE = re.compile(r"^Traceback \(most recent call last\):")
# vLLM's logger header: "ERROR 11-30 09:30:48 [core.py:1100] " (tracebacks are logged line by line)
LOG_HEADER_RE = re.compile(
    r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] ?"
)

# argparse refusing the command line: "vllm serve: error: argument --dtype: invalid choice: ..."
USAGE_ERROR_RE = re.compile(
    r"^(?:[\w.-]+ )?[\w.-]+: error: (?P<what>argument (?P<flag>\S+?):|unrecognized arguments"
    r"|the following arguments are required)", re.M)

# an indented continuation line (after an optional process prefix)
INDENTED_RE = re.compile(r"^(?:\([A-Za-z0-9_.:-]+ pid=\d+\) )?[ \t]+\S")

# Platform default block size when the user did not set one (vLLM >= 0.20).
PLATFORM_DEFAULT_BLOCK_SIZE = {"cpu": 128, "cuda": 16, "rocm": 16, "xpu": 64}


class ProbeError(Exception):
    """The log does not give one consistent block size.

    ``outcome`` names the case for the probe result (``ranks_disagree``, ``error``).
    """

    def __init__(self, msg, outcome="error", reports=None):
        super(ProbeError, self).__init__(msg)
        self.outcome = outcome
        self.reports = reports or []


BlockSizeLine = collections.namedtuple("BlockSizeLine", ["proc", "pid", "n", "line"])


def strip_ansi(text):
    """Remove ANSI colour / cursor escapes and carriage returns."""
    return ANSI_RE.sub("", text).replace("\r", "")


def split_prefix(line):
    """Return (proc, pid, rest) for one ANSI-stripped line.

    Lines without a ``(<Proc> pid=<n>)`` prefix belong to process ``main``
    (pid None).
    """
    m = PREFIX_RE.match(line)
    if not m:
        return "main", None, line
    return m.group("proc"), int(m.group("pid")), line[m.end():]


def message_of(line):
    """The message part of a log line: without process prefix and logger header."""
    rest = split_prefix(line.strip())[2]
    return LOG_HEADER_RE.sub("", rest, count=1)


def parse_block_size_lines(text):
    """Every ``Setting attention block size to N tokens`` line in text.

    Returns a list of BlockSizeLine(proc, pid, n, line) in log order; line is
    the ANSI-stripped line.
    """
    found = []
    for raw in strip_ansi(text).split("\n"):
        m = SET_BLOCK_RE.search(raw)
        if not m:
            continue
        line = raw.strip()
        proc, pid, _rest = split_prefix(line)
        found.append(BlockSizeLine(proc, pid, int(m.group(1)), line))
    return found


def rank_key(entry):
    """A key identifying the reporting rank: TP/PP/DP rank from the process
    name when present (``Worker_TP1``, ``Worker_DP0_PP1_TP0``), else the pid."""
    m = TP_RANK_RE.search(entry.proc)
    if m:
        return "dp%s_pp%s_tp%s" % (m.group("dp") or 0, m.group("pp") or 0, m.group("tp"))
    if entry.pid is not None:
        return "pid%d" % entry.pid
    return entry.proc


def reporting_ranks(lines):
    """Distinct reporters among the block size lines (see rank_key)."""
    return sorted(set(rank_key(e) for e in lines))


def resolve_block_size(lines):
    """The single N all reporters agree on.

    Raises ProbeError when there is no line or when ranks disagree.
    """
    if not lines:
        raise ProbeError("vLLM did not log 'Setting attention block size to N tokens'")
    values = sorted(set(e.n for e in lines))
    if len(values) > 1:
        detail = ", ".join("%s(pid %s)=%d" % (e.proc, e.pid, e.n) for e in lines)
        raise ProbeError(
            "vLLM ranks disagree on the attention block size: %s" % detail,
            outcome="ranks_disagree", reports=reports_of(lines),
        )
    return values[0]


def reports_of(lines):
    """Every rank's report as a list of dicts (proc, pid, n)."""
    return [{"proc": e.proc, "pid": e.pid, "n": e.n} for e in lines]


def parse_padding(text):
    """The last ``Padding mamba page size by X%`` value, or None."""
    vals = PADDING_RE.findall(strip_ansi(text))
    return float(vals[-1]) if vals else None


def effective_block_size(text, requested=None, platform="cuda"):
    """Block size in effect when vLLM became ready without printing the line.

    Returns (value, how) where how names the evidence: ``log:backend``,
    ``log:non-default-args``, ``log:config``, ``requested`` or
    ``platform-default``. value is None when nothing is known.
    """
    clean = strip_ansi(text)
    for regex, how in (
        (KV_BACKEND_BLOCK_RE, "log:backend"),
        (CACHE_INFO_BLOCK_RE, "log:cache_config_info"),
        (NON_DEFAULT_BLOCK_RE, "log:non-default-args"),
        (CONFIG_BLOCK_RE, "log:config"),
    ):
        vals = regex.findall(clean)
        if vals:
            return int(vals[-1]), how
    if requested:
        return int(requested), "requested"
    default = PLATFORM_DEFAULT_BLOCK_SIZE.get(platform)
    if default:
        return default, "platform-default"
    return None, "unknown"


def looks_hybrid(text):
    """True when the log shows Mamba / linear-attention state handling."""
    return bool(HYBRID_HINT_RE.search(strip_ansi(text)))


def _exception_lines(lines):
    out = []
    for idx, line in enumerate(lines):
        rest = message_of(line).strip()
        if EXC_LINE_RE.match(rest) and not rest.startswith("Traceback"):
            out.append(idx)
    return out


def find_error_tail(text, max_lines=30):
    """The relevant part of a failed vLLM log.

    Picks the root-cause exception (the last exception line that is not
    vLLM's generic "Engine core initialization failed. See root cause above"
    wrapper), and returns its traceback (from the nearest ``Traceback`` line
    before it, at most max_lines lines), followed by the final exception line
    when that is a different one. Without any exception line: the last
    ERROR line with context, else simply the last max_lines lines.
    """
    lines = [ln.rstrip() for ln in strip_ansi(text).split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    exc = _exception_lines(lines)
    if not exc:
        errs = [i for i, ln in enumerate(lines) if ERROR_LEVEL_RE.search(split_prefix(ln)[2])]
        if errs:
            end = errs[-1] + 1
            return "\n".join(lines[max(0, end - max_lines):min(len(lines), end + 3)])
        return "\n".join(lines[-max_lines:])
    root = exc[-1]
    for idx in reversed(exc):
        if not GENERIC_FAILURE_RE.search(lines[idx]):
            root = idx
            break
    start = root
    while start > 0 and root - start < max_lines - 1:
        if TRACEBACK_RE.match(message_of(lines[start]).strip()):
            break
        start -= 1
    # keep a possible multi-line message after the exception line
    end = root + 1
    while end < len(lines) and end - root < 4:
        rest = message_of(lines[end])
        if not rest.strip() or TRACEBACK_RE.match(rest.strip()) or re.match(r"^(INFO|WARNING|ERROR|DEBUG)\b", rest.strip()):
            break
        if EXC_LINE_RE.match(rest.strip()):
            break
        end += 1
    chunk = lines[start:end]
    if len(chunk) > max_lines:
        chunk = chunk[-max_lines:]
    last = exc[-1]
    if last != root and lines[last] not in chunk:
        chunk = chunk + ["...", lines[last]]
    return "\n".join(chunk)


def usage_error(text):
    """(True, flag or None) when vLLM's argument parser refused the command line."""
    m = USAGE_ERROR_RE.search(strip_ansi(text or ""))
    if not m:
        return False, None
    return True, m.group("flag")


def summarize_error(text, max_chars=400):
    """One line naming the failure (the root-cause exception line, with the
    first indented detail line when the exception's own line says little,
    e.g. pydantic's "1 validation error for ModelConfig"), or ''."""
    tail = find_error_tail(text, max_lines=60)
    lines = [ln for ln in tail.split("\n") if ln.strip()]
    for idx, ln in enumerate(lines):
        rest = message_of(ln).strip()
        if EXC_LINE_RE.match(rest) and not GENERIC_FAILURE_RE.search(rest) and not rest.startswith("Traceback"):
            for nxt in lines[idx + 1:idx + 3]:
                if not INDENTED_RE.match(nxt):
                    break
                detail = message_of(nxt).strip()
                if detail and not detail.startswith("For further information"):
                    rest = "%s: %s" % (rest.rstrip(": "), detail)
                    break
            return rest[:max_chars]
    return message_of(lines[-1]).strip()[:max_chars] if lines else ""


class LogScanner(object):
    """Incremental scanner fed with raw log chunks while vLLM starts.

    state(expected_ranks) returns:
      ``found``  every expected rank reported (or the engine moved on after
                 at least one report);
      ``ready``  vLLM is serving and never printed the line;
      ``failed`` vLLM reported that the engine could not start;
      None       keep waiting.
    """

    def __init__(self):
        self._buf = ""
        self.lines = []
        self.block_lines = []
        self.ready = False
        self.moved_on = False
        self.engine_failed = False
        self.padding_pct = None
        self.engine_block_size = None
        self.engine_hybrid = None

    def feed(self, chunk):
        if isinstance(chunk, bytes):
            chunk = chunk.decode("utf-8", "replace")
        self._buf += chunk
        if "\n" not in self._buf:
            return
        complete, self._buf = self._buf.rsplit("\n", 1)
        for raw in complete.split("\n"):
            self._add(raw)

    def flush(self):
        """Treat a trailing partial line as complete (process has exited)."""
        if self._buf:
            self._add(self._buf)
            self._buf = ""

    def _add(self, raw):
        line = strip_ansi(raw).rstrip()
        self.lines.append(line)
        m = SET_BLOCK_RE.search(line)
        if m:
            proc, pid, _rest = split_prefix(line.strip())
            self.block_lines.append(BlockSizeLine(proc, pid, int(m.group(1)), line.strip()))
            return
        pm = PADDING_RE.search(line)
        if pm:
            self.padding_pct = float(pm.group(1))
        em = ENGINE_BUILT_RE.search(line)
        if em:
            self.engine_block_size = int(em.group(1))
            self.engine_hybrid = em.group(2) == "True"
            self.ready = self.moved_on = True
            return
        if READY_RE.search(line):
            self.ready = True
        if MOVED_ON_RE.search(line):
            self.moved_on = True
        if ENGINE_FAILED_RE.search(line):
            self.engine_failed = True

    @property
    def text(self):
        return "\n".join(self.lines + ([self._buf] if self._buf else []))

    def state(self, expected_ranks=1):
        if self.block_lines:
            if len(reporting_ranks(self.block_lines)) >= max(1, int(expected_ranks)):
                return "found"
            if self.moved_on or self.ready:
                return "found"
            if self.engine_failed:
                return "failed"
            return None
        if self.ready:
            return "ready"
        if self.engine_failed:
            return "failed"
        return None


def scan_text(text):
    """A LogScanner fed with a complete log (e.g. a service's journal)."""
    scanner = LogScanner()
    scanner.feed(text)
    scanner.flush()
    return scanner


def block_size_decision(scanner, state, expected_ranks=1, requested=None, platform="cuda"):
    """N from a log whose scanner state is ``found`` or ``ready``.

    Returns a dict with ``vllm_block_size``, ``outcome`` (``found``,
    ``not_hybrid`` or ``block_size_sufficient``), ``reason``, ``log_line``,
    ``reports`` and, when vLLM printed it, ``padding_pct``.
    Raises ProbeError (outcome ``ranks_disagree`` or ``error``).
    """
    text = scanner.text
    out = {}
    if scanner.padding_pct is not None:
        out["padding_pct"] = scanner.padding_pct
    if state == "found":
        n = resolve_block_size(scanner.block_lines)
        ranks = len(reporting_ranks(scanner.block_lines))
        reason = "vLLM logged the attention block size"
        if int(expected_ranks or 1) > 1:
            reason += " (%d of %d tensor-parallel ranks reported, all %d)" % (
                min(ranks, expected_ranks), expected_ranks, n)
        out.update(vllm_block_size=n, outcome="found", reason=reason,
                   log_line=scanner.block_lines[0].line, reports=reports_of(scanner.block_lines))
        return out
    if state != "ready":
        raise ProbeError("vLLM's log shows neither the block size nor a ready server (state %s)" % state)
    if scanner.engine_block_size is not None:
        value, how = scanner.engine_block_size, "engine config"
    else:
        value, how = effective_block_size(text, requested=requested, platform=platform)
    if value is None:
        raise ProbeError("vLLM became ready without logging the block size, and the "
                         "effective block size is unknown")
    if scanner.engine_hybrid or looks_hybrid(text):
        outcome = "block_size_sufficient"
        reason = ("vLLM became ready without 'Setting attention block size': the model is "
                  "hybrid but block size %d (%s) already gives an attention page >= the "
                  "mamba page" % (value, how))
    else:
        outcome = "not_hybrid"
        reason = ("vLLM became ready without 'Setting attention block size': the model has "
                  "no mamba/linear-attention state to align with, effective block size %d (%s)"
                  % (value, how))
    out.update(vllm_block_size=value, outcome=outcome, reason=reason, log_line=None, reports=[])
    return out
