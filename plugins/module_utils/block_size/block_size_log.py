# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse vLLM's log output for the unified hybrid block size (pure, no I/O).

vLLM prints, in the process that aligns the attention block size with the
Mamba / Gated-DeltaNet state page::

    (EngineCore pid=187) INFO 05-01 17:08:53 [interface.py:606] Setting attention
    block size to 1568 tokens to ensure that attention page size is >= mamba page size.

vLLM >= 0.32 can set N a second time in the same call, after the Mamba alignment, when layers keep a
higher-precision KV cache (``--kv-cache-dtype-skip-layers``, or a TurboQuant/UltraQuant KV dtype, which
adds its boundary layers)::

    (EngineCore pid=187) INFO 05-01 17:08:53 [interface.py:924] Setting attention block size to 2048
    tokens so the quantized primary KV page covers the higher-precision padded-spec page.

and vLLM's XPU platform may round it once more (``[XPU]Setting attention block size to N tokens to
ensure multiple of 64.``). N is the value vLLM finally settles on: each rank's last record of any of
these sentences, read only once that rank has logged a later line (or the engine moved on), so that a
probe never stops between two records.

N is taken only from vLLM's own log record of that message (vllm/logger.py's format
``[<process> pid=<n>) ]INFO MM-DD HH:MM:SS [<file>.py:<line>] <message>``, the file being the
platform's ``interface.py`` (vLLM >= 0.20) or the model config's ``config.py`` (older), bare or as
a shortened path at DEBUG level), where the message is the whole sentence: an echoed argument or a
logged prompt that contains the sentence sets nothing. The ``file:line`` number moves between
versions and is not checked. N must be a positive multiple of the platform's kernel alignment.

The scanner keeps bounded state whatever the log's size: lines are cut at MAX_LINE_CHARS, and only
the first HEAD_LINES and the last TAIL_LINES lines are kept for error reports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import codecs
import collections
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import (
    LEGACY_ALIGNMENT,
    PLATFORMS,
)

SET_BLOCK_RE = re.compile(r"Setting attention block size to (\d+) tokens")
# vLLM's own log record of the message (after the ANSI escapes are stripped): the whole line
BLOCK_RECORD_RE = re.compile(
    r"^(?:\((?P<proc>[A-Za-z0-9_.:-]+) pid=(?P<pid>\d+)\) ?)?(?:INFO|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?:\[(?:[A-Za-z0-9_]+/)*(?:interface|config)\.py:\d+\] "
    r"Setting attention block size to (?P<n>\d+) tokens to ensure that attention page size is "
    r">= mamba page size\."
    # vLLM >= 0.32: the second alignment (a quantized KV cache beside higher-precision skip layers)
    r"|\[(?:[A-Za-z0-9_]+/)*interface\.py:\d+\] "
    r"Setting attention block size to (?P<qn>\d+) tokens so the quantized primary KV page covers the "
    r"higher-precision padded-spec page\."
    # vLLM's XPU platform logs its own sentence ("..., ..." before 0.32, "." since)
    r"|\[(?:[A-Za-z0-9_]+/)*xpu\.py:\d+\] \[XPU\] ?Setting attention block size to (?P<xn>\d+) tokens "
    r"to ensure multiple of \d+(?:,.*|\.))$")
# bounds of the scanner's memory
MAX_LINE_CHARS = 16384
HEAD_LINES = 200
TAIL_LINES = 800
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
# The probe's engine launcher built vLLM's engine (_probe/engine_launcher.py): every
# block size decision has been taken; block_size is the engine config's, hybrid its is_hybrid.
ENGINE_BUILT_RE = re.compile(r"^fleet-probe: engine built: block_size=(\d+) hybrid=(True|False)")
# Block size as vLLM reports it elsewhere, when it does not print the line.
# (both only as the whole message of one of vLLM's own log records, see record_messages)
KV_BACKEND_BLOCK_RE = re.compile(r"^Setting kv cache block size to (\d+) for \S+ backend(?:\(s\))?\.?$")
NON_DEFAULT_ARGS = "non-default args: "

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
        entry = block_record(raw)
        if entry is not None:
            found.append(entry)
    return found


def block_record(line):
    """BlockSizeLine of one ANSI-stripped line when it is vLLM's own log record of the message,
    else None (a line that merely contains the sentence)."""
    line = line.strip()
    m = BLOCK_RECORD_RE.match(line)
    if not m:
        return None
    pid = int(m.group("pid")) if m.group("pid") else None
    n = m.group("n") or m.group("qn") or m.group("xn")
    return BlockSizeLine(m.group("proc") or "main", pid, int(n), line)


def kernel_alignment(platform, vllm_version=None):
    """The kernel block alignment every N of ``platform`` is a multiple of (hardware.PLATFORMS'
    kernel minimum: CUDA 16, CPU 32; 16 before vLLM 0.20; 1 for a platform it does not know)."""
    m = re.match(r"^(\d+)\.(\d+)", str(vllm_version or ""))
    if m and (int(m.group(1)), int(m.group(2))) < (0, 20):
        return LEGACY_ALIGNMENT
    return PLATFORMS.get(platform, (None, 1))[1]


def check_block_size(n, platform, vllm_version=None):
    """None when N is a positive multiple of the kernel alignment, else the sentence why not."""
    align = kernel_alignment(platform, vllm_version)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n % align:
        return ("N=%r is not a positive multiple of the %s kernel alignment %d; refused, nothing cached"
                % (n, platform, align))
    return None


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


def final_lines(lines):
    """Each reporter's last block size record (the N it settled on), in the order of those records."""
    last = collections.OrderedDict()
    for entry in lines:
        key = rank_key(entry)
        last.pop(key, None)
        last[key] = entry
    return list(last.values())


def resolve_block_size(lines):
    """The single N all reporters settled on (each reporter's last record).

    Raises ProbeError when there is no line or when ranks disagree.
    """
    if not lines:
        raise ProbeError("vLLM did not log 'Setting attention block size to N tokens'")
    final = final_lines(lines)
    values = sorted(set(e.n for e in final))
    if len(values) > 1:
        detail = ", ".join("%s(pid %s)=%d" % (e.proc, e.pid, e.n) for e in final)
        raise ProbeError(
            "vLLM ranks disagree on the attention block size: %s" % detail,
            outcome="ranks_disagree", reports=reports_of(final),
        )
    return values[0]


def reports_of(lines):
    """Every rank's report as a list of dicts (proc, pid, n)."""
    return [{"proc": e.proc, "pid": e.pid, "n": e.n} for e in lines]


def parse_padding(text):
    """The last ``Padding mamba page size by X%`` value, or None."""
    vals = PADDING_RE.findall(strip_ansi(text))
    return float(vals[-1]) if vals else None


def record_messages(text):
    """The message of every line of text that is one of vLLM's own log records (logger header
    after an optional process prefix), in log order."""
    for raw in strip_ansi(text).split("\n"):
        rest = split_prefix(raw.strip())[2]
        m = LOG_HEADER_RE.match(rest)
        if m:
            yield rest[m.end():]


def _non_default_block_size(message):
    """block_size of vLLM's ``non-default args: {...}`` record, read as the dict it is (a string
    inside it that looks like a block size does not count)."""
    try:
        args = ast.literal_eval(message[len(NON_DEFAULT_ARGS):])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    value = args.get("block_size") if isinstance(args, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def effective_block_size(text, requested=None, platform="cuda"):
    """Block size in effect when vLLM became ready without printing the line.

    Returns (value, how) where how names the evidence: ``log:backend`` (vLLM's record "Setting kv
    cache block size to B for <backend> backend."), ``log:non-default-args`` (the block_size of vLLM's
    "non-default args" record), ``requested`` or ``platform-default``. Only vLLM's own records count.
    value is None when nothing is known.
    """
    backend = args = None
    for message in record_messages(text):
        m = KV_BACKEND_BLOCK_RE.match(message)
        if m:
            backend = int(m.group(1))
        elif message.startswith(NON_DEFAULT_ARGS):
            args = _non_default_block_size(message) or args
    if backend is not None:
        return backend, "log:backend"
    if args is not None:
        return args, "log:non-default-args"
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
      ``found``  every expected rank reported and logged a later line (vLLM
                 may set N again right after its first record), or the
                 engine moved on after at least one report;
      ``ready``  vLLM is serving and never printed the line;
      ``failed`` vLLM reported that the engine could not start;
      None       keep waiting.
    """

    def __init__(self, max_line=MAX_LINE_CHARS, head_lines=HEAD_LINES, tail_lines=TAIL_LINES):
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._buf = ""
        self._discarding = False  # inside a line longer than max_line: drop until its end
        self.max_line = max_line
        self.head = []
        self.tail = collections.deque(maxlen=tail_lines)
        self.head_lines = head_lines
        self.line_count = 0
        self.cut_lines = 0
        self.block_lines = []
        # processes whose last line so far is a block size record: vLLM may set N again right after
        self.unsettled = set()
        self.ready = False
        self.moved_on = False
        self.engine_failed = False
        self.padding_pct = None
        self.engine_block_size = None
        self.engine_hybrid = None

    @property
    def lines(self):
        """The kept lines: the first head_lines and the last tail_lines (a marker between)."""
        skipped = self.line_count - len(self.head) - len(self.tail)
        middle = ["... %d lines not kept ..." % skipped] if skipped > 0 else []
        return self.head + middle + list(self.tail)

    def feed(self, chunk):
        """Add a chunk (bytes or text); memory stays bounded whatever the chunk's lines."""
        if isinstance(chunk, bytes):
            chunk = self._decoder.decode(chunk)
        start = 0
        while True:
            end = chunk.find("\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._discarding:
                room = self.max_line - len(self._buf)
                if len(piece) > room:
                    piece = piece[:max(0, room)]
                    self._discarding = True
                    self.cut_lines += 1
                self._buf += piece
            if end < 0:
                return
            self._add(self._buf)
            self._buf = ""
            self._discarding = False
            start = end + 1

    def flush(self):
        """Treat a trailing partial line as complete (process has exited)."""
        if self._buf:
            self._add(self._buf)
            self._buf = ""
        self._discarding = False

    def _keep(self, line):
        self.line_count += 1
        if len(self.head) < self.head_lines:
            self.head.append(line)
        else:
            self.tail.append(line)

    def _add(self, raw):
        line = strip_ansi(raw).rstrip()
        self._keep(line)
        entry = block_record(line)
        if entry is not None:
            self.block_lines.append(entry)
            del self.block_lines[:-256]  # the last reports of each rank are enough
            self.unsettled.add((entry.proc, entry.pid))
            return
        pm = PADDING_RE.search(line)
        if pm:
            self.padding_pct = float(pm.group(1))
        elif self.unsettled:
            # a later line of the same process: that process's block size decision is taken
            self.unsettled.discard(split_prefix(line.strip())[:2])
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

    def reported(self, expected_ranks=1):
        """True when every expected rank has logged the block size (settled or not)."""
        return len(reporting_ranks(self.block_lines)) >= max(1, int(expected_ranks))

    def state(self, expected_ranks=1):
        if self.block_lines:
            if self.reported(expected_ranks) and not self.unsettled:
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


def block_size_decision(scanner, state, expected_ranks=1, requested=None, platform="cuda", vllm_version=None):
    """N from a log (see _decision), refused unless a positive multiple of the kernel alignment."""
    out = _decision(scanner, state, expected_ranks, requested, platform)
    why = check_block_size(out["vllm_block_size"], platform, vllm_version)
    if why is not None:
        raise ProbeError("vLLM's log gives %s" % why, outcome="error", reports=out.get("reports"))
    return out


def _decision(scanner, state, expected_ranks, requested, platform):
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
        final = final_lines(scanner.block_lines)
        ranks = len(final)
        reason = "vLLM logged the attention block size"
        if int(expected_ranks or 1) > 1:
            reason += " (%d of %d tensor-parallel ranks reported, all %d)" % (
                min(ranks, expected_ranks), expected_ranks, n)
        if len(scanner.block_lines) > ranks:
            reason += "; the last of vLLM's %d records of it" % len(scanner.block_lines)
        out.update(vllm_block_size=n, outcome="found", reason=reason,
                   log_line=final[-1].line, reports=reports_of(final))
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
