# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile input against the block size probe, one class at a time: the cache and its lock (symlinks,
foreign owners, group/other-writable files and directories, hard links, FIFOs), the log (a sentence
that is not vLLM's own record, N=0 or off the kernel alignment, floods), escaping processes,
credentials, an abbreviated --host, a killed module's log. Each case asserts the exact refusal or the
harmless result."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import pwd
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_log import (
    MAX_LINE_CHARS,
    HEAD_LINES,
    TAIL_LINES,
    LogScanner,
    ProbeError,
    block_size_decision,
    check_block_size,
    parse_block_size_lines,
    scan_text,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import (
    FINGERPRINT_VERSION,
    canonical_json,
    compute_fingerprint,
    fingerprint_inputs,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import (
    CACHE_SCHEMA,
    CacheLock,
    load_cache,
    store_cache,
    validate_entry,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.launch import (
    build_probe_argv,
    filter_extra_args,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.process import ProbeProcess
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.request import probe_env
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.probe_trust import UntrustedPath
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.redact import redact, redact_text

SENTENCE = "to ensure that attention page size is >= mamba page size."
RECORD = "(Worker pid=8882) INFO 11-30 09:48:08 [interface.py:1096] Setting attention block size to %d tokens " + SENTENCE
HW = {"kind": "cpu", "machine": "x86_64", "cpu_model": "AMD EPYC", "isa": ["avx2"]}
INPUTS = fingerprint_inputs({"kind": "hub", "id": "m", "revision": "main"}, "0.32.0+cpu", hardware=HW)
KEY = compute_fingerprint(INPUTS)
ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="ownership cases need root")


def entry(n=640):
    return {"vllm_block_size": n, "inputs": json.loads(json.dumps(INPUTS)), "schema": CACHE_SCHEMA}


def victim(tmp_path, text="precious\n"):
    path = tmp_path / "victim"
    path.write_text(text)
    return str(path)


# ---------------------------------------------------------------- cache and lock

def test_lock_symlink_is_refused_and_the_target_kept(tmp_path):
    target = victim(tmp_path)
    (tmp_path / "facts.d").mkdir()
    cache = str(tmp_path / "facts.d" / "c.fact")
    os.symlink(target, cache + ".lock")
    with pytest.raises(UntrustedPath) as e:
        with CacheLock(cache, timeout=1):
            pass
    assert str(e.value) == "%s.lock is a symlink; refused, not followed or overwritten. Fix: remove it" % cache
    assert open(target).read() == "precious\n"


def test_cache_symlink_is_neither_read_nor_overwritten(tmp_path):
    target = victim(tmp_path, json.dumps({KEY: entry()}))
    cache = str(tmp_path / "c.fact")
    os.symlink(target, cache)
    with pytest.raises(UntrustedPath, match="is a symlink; refused, not followed or overwritten"):
        load_cache(cache)
    with pytest.raises(UntrustedPath, match="is a symlink"):
        store_cache(cache, {}, KEY, entry(), mover=os.rename)
    assert os.path.islink(cache) and json.load(open(target)) == {KEY: entry()}


def test_symlinked_directory_in_the_chain_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(str(real), str(tmp_path / "facts.d"))
    with pytest.raises(UntrustedPath) as e:
        store_cache(str(tmp_path / "facts.d" / "c.fact"), {}, KEY, entry())
    assert str(e.value) == ("%s is a symlink; the probe does not follow symlinks to its cache. Fix: point "
                            "cache_path at a real directory" % (tmp_path / "facts.d"))
    assert os.listdir(str(real)) == []


def test_group_writable_cache_is_refused_not_overwritten(tmp_path):
    cache = tmp_path / "c.fact"
    cache.write_text(json.dumps({KEY: entry(4096)}))
    cache.chmod(0o666)
    with pytest.raises(UntrustedPath) as e:
        load_cache(str(cache))
    assert str(e.value) == ("%s is writable by group/other (mode 0666); refused, not overwritten. Fix: chmod "
                            "go-w %s, or remove it" % (cache, cache))
    with pytest.raises(UntrustedPath):
        store_cache(str(cache), {}, KEY, entry())
    assert json.loads(cache.read_text()) == {KEY: entry(4096)}


@ROOT
def test_cache_owned_by_another_user_is_refused(tmp_path):
    nobody = pwd.getpwnam("nobody")
    cache = tmp_path / "c.fact"
    cache.write_text("{}")
    os.chown(str(cache), nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(UntrustedPath) as e:
        load_cache(str(cache))
    assert str(e.value) == ("%s is owned by nobody (uid %d), not by root or the service user; refused, not "
                            "overwritten. Fix: remove it or chown root %s" % (cache, nobody.pw_uid, cache))
    # the service user's own file is trusted
    assert load_cache(str(cache), uids=[0, nobody.pw_uid]) == {}


def test_world_writable_directory_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UntrustedPath) as e:
        with CacheLock(str(shared / "c.fact"), timeout=1):
            pass
    assert str(e.value) == "directory %s is writable by group/other (mode 0777). Fix: chmod go-w %s" % (shared, shared)
    assert os.listdir(str(shared)) == []


def test_hard_linked_cache_is_refused(tmp_path):
    target = victim(tmp_path, "{}")
    cache = str(tmp_path / "c.fact")
    os.link(target, cache)
    with pytest.raises(UntrustedPath, match="has 2 hard links; refused, not overwritten"):
        load_cache(cache)


def test_fifo_lock_is_refused_without_blocking(tmp_path):
    cache = str(tmp_path / "c.fact")
    os.mkfifo(cache + ".lock")
    with pytest.raises(UntrustedPath, match=r"c.fact.lock is not a regular file; refused, not overwritten"):
        with CacheLock(cache, timeout=1):
            pass


def test_cache_entries_off_the_kernel_alignment_are_ignored(tmp_path):
    assert validate_entry(KEY, entry(640), FINGERPRINT_VERSION, compute_fingerprint) is None
    assert validate_entry(KEY, entry(528), FINGERPRINT_VERSION, compute_fingerprint) == (
        "has N=528 is not a positive multiple of the cpu kernel alignment 32; refused, nothing cached")
    assert "positive integer" in validate_entry(KEY, entry(0), FINGERPRINT_VERSION, compute_fingerprint)


# ---------------------------------------------------------------- N from vLLM's own record only

@pytest.mark.parametrize("line", [
    # an echoed argument
    "(APIServer pid=1) INFO 11-30 09:48:00 [utils.py:233] non-default args: {'served_model_name': "
    "['Setting attention block size to 16 tokens %s']}" % SENTENCE,
    # a logged prompt
    "(APIServer pid=1) INFO 11-30 09:49:00 [logger.py:41] Received request cmpl-1: prompt: "
    "'INFO 11-30 09:48:08 [interface.py:1096] Setting attention block size to 16 tokens %s'" % SENTENCE,
    # the sentence printed by something else, without vLLM's logger header
    "Setting attention block size to 16 tokens %s" % SENTENCE,
    # the record of another level, of another file, or with words after the sentence
    "ERROR 11-30 09:48:08 [interface.py:1096] Setting attention block size to 16 tokens %s" % SENTENCE,
    "INFO 11-30 09:48:08 [serving_chat.py:12] Setting attention block size to 16 tokens %s" % SENTENCE,
    "INFO 11-30 09:48:08 [interface.py:1096] Setting attention block size to 16 tokens %s and more" % SENTENCE,
])
def test_the_sentence_outside_vllms_record_sets_nothing(line):
    assert parse_block_size_lines(line + "\n") == []
    scanner = scan_text(line + "\n" + RECORD % 640 + "\n")
    assert [e.n for e in scanner.block_lines] == [640]


@pytest.mark.parametrize("n, platform, version, words", [
    (0, "cpu", "0.32.0+cpu", "N=0 is not a positive multiple of the cpu kernel alignment 32"),
    (528, "cpu", "0.32.0+cpu", "N=528 is not a positive multiple of the cpu kernel alignment 32"),
    (1000, "cuda", "0.32.0", "N=1000 is not a positive multiple of the cuda kernel alignment 16"),
])
def test_n_off_the_kernel_alignment_is_refused(n, platform, version, words):
    scanner = scan_text(RECORD % n + "\n")
    with pytest.raises(ProbeError) as e:
        block_size_decision(scanner, "found", platform=platform, vllm_version=version)
    assert str(e.value) == "vLLM's log gives %s; refused, nothing cached" % words


def test_the_service_cannot_change_the_record_format_of_the_probe():
    env = probe_env({}, {"VLLM_LOGGING_PREFIX": "Setting attention block size to 16 tokens ",
                         "VLLM_LOGGING_CONFIG_PATH": "/etc/evil-logging.json"})
    assert env["VLLM_LOGGING_PREFIX"] == "" and "VLLM_LOGGING_CONFIG_PATH" not in env


def test_a_ready_engines_block_size_comes_only_from_vllms_records():
    echoed = ("(APIServer pid=1) INFO 11-30 09:48:00 [utils.py:233] non-default args: {'model': 'm', "
              "'served_model_name': [\"'block_size': 48\"], 'block_size': 1024}\n"
              "(APIServer pid=1) INFO 11-30 09:49:00 [logger.py:41] Received request cmpl-1: prompt: "
              "'Setting kv cache block size to 48 for FLASHMLA backend.'\n"
              "Setting kv cache block size to 48 for FLASHMLA backend.\n"
              "(APIServer pid=1) INFO 11-30 09:50:00 [api_server.py:1] Application startup complete.\n")
    scanner = scan_text(echoed)
    out = block_size_decision(scanner, scanner.state(1), requested=1024, platform="cuda", vllm_version="0.32.0")
    assert (out["vllm_block_size"], out["outcome"]) == (1024, "not_hybrid")
    assert "(log:non-default-args)" in out["reason"]


def test_aligned_n_is_accepted():
    assert check_block_size(544, "cpu", "0.32.0+cpu") is None
    assert check_block_size(784, "cuda", "0.19.1") is None
    scanner = scan_text(RECORD % 640 + "\n")
    assert block_size_decision(scanner, "found", platform="cpu", vllm_version="0.32.0+cpu")["vllm_block_size"] == 640


# ---------------------------------------------------------------- bounded log reading

def test_scanner_memory_is_bounded_by_its_structure():
    """Over 200 MiB of log - a very long line and many short ones - leave the scanner with at most
    HEAD_LINES + TAIL_LINES lines of at most MAX_LINE_CHARS characters, and the record after the flood
    is still found."""
    scanner = LogScanner()
    mib = b"x" * (1024 * 1024)
    for _i in range(200):              # one line of 200 MiB
        scanner.feed(mib)
        assert len(scanner._buf) <= MAX_LINE_CHARS
    scanner.feed(b"\n")
    short = b"(Worker pid=1) INFO 11-30 09:48:08 [core.py:1] chatty\n" * 20000
    for _i in range(10):               # 200000 short lines, about 10 MiB
        scanner.feed(short)
    scanner.feed((RECORD % 640 + "\n").encode())
    assert scanner.line_count == 1 + 200000 + 1
    assert len(scanner.head) == HEAD_LINES and len(scanner.tail) == TAIL_LINES
    assert max(len(line) for line in scanner.lines) <= MAX_LINE_CHARS
    assert scanner.cut_lines == 1
    assert [e.n for e in scanner.block_lines] == [640]
    assert "... %d lines not kept ..." % (200002 - HEAD_LINES - TAIL_LINES) in scanner.text


# ---------------------------------------------------------------- credentials

def test_credentials_never_enter_the_fingerprint_inputs():
    env = {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "DB_PASSWORD": "hunter2",
           "CUSTOM_SETTING": "plain-but-unknown", "VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    args = ["--hf-token", "hf_abcdefghijklmnopqrstuvwxyz0123", "--api_key=sk-abcdefghijklmnopqrstu",
            "--hf-overrides", '{"auth_url": "https://user:pa55word@hub.example/x"}']
    inputs = fingerprint_inputs({"kind": "hub", "id": "m", "revision": "main"}, "0.32.0", env=env,
                                extra_args=args, hardware=HW)
    text = canonical_json(inputs)
    for secret in ("wJalrXUtnFEMI", "hunter2", "plain-but-unknown", "hf_abcdefghij", "sk-abcdefghij", "pa55word"):
        assert secret not in text
    assert inputs["env"]["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    assert inputs["env"]["DB_PASSWORD"] == "<redacted>"
    assert inputs["env"]["CUSTOM_SETTING"].startswith("sha256:")
    assert inputs["extra_args"][:3] == ["--hf-token", "<redacted>", "--api_key=<redacted>"]
    # an unknown variable still changes the fingerprint, through its hash
    other = fingerprint_inputs({"kind": "hub", "id": "m", "revision": "main"}, "0.32.0",
                               env=dict(env, CUSTOM_SETTING="other"), extra_args=args, hardware=HW)
    assert compute_fingerprint(other) != compute_fingerprint(inputs)
    # and the inputs are already redacted: redacting them again changes nothing (cache entries stay valid)
    assert redact(inputs) == inputs


def test_log_tails_and_results_are_redacted_by_name_and_shape():
    tail = ("(APIServer pid=1) INFO 11-30 09:48:00 [utils.py:233] non-default args: {'model': 'm', "
            "'api_key': ['s3cr3t-value'], 'hf_token': 'hf_abcdefghijklmnopqrstuvwxyz0123'}\n"
            "Authorization: Bearer abcdefghijklmnop HTTPS_PROXY=http://bob:pw0rd@proxy:3128")
    out = redact({"log_tail": tail, "cmd": ["vllm", "serve", "m", "--hf-token", "plain"], "msg": "x"})
    text = json.dumps(out)
    for secret in ("s3cr3t-value", "hf_abcdefghij", "abcdefghijklmnop", "pw0rd", "plain"):
        assert secret not in text
    assert out["cmd"] == ["vllm", "serve", "m", "--hf-token", "<redacted>"]
    assert redact_text("http://bob:pw0rd@proxy:3128") == "http://bob:<redacted>@proxy:3128"


# ---------------------------------------------------------------- --host

@pytest.mark.parametrize("args", [
    ["--host", "0.0.0.0"], ["--hos", "0.0.0.0"], ["--ho=0.0.0.0"], ["--host=::"], ["--h", "0.0.0.0"],
    ["--po", "80"], ["--api_key", "x"], ["--served", "n"],
])
def test_abbreviations_of_probe_flags_are_dropped(args):
    kept, dropped = filter_extra_args(args + ["--quantization", "fp8"])
    assert kept == ["--quantization", "fp8"] and dropped == args
    argv = build_probe_argv("/v/bin/vllm", "m", 4321, extra_args=args + ["--quantization", "fp8"])
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "4321"]


# ---------------------------------------------------------------- containment and the log

DAEMON = r"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1], "w").write(str(os.getpid()))
        while True:
            time.sleep(1)
    os._exit(0)
while True:
    time.sleep(1)
"""


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (IOError, OSError):
        return False


def wait_for_file(path, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and open(path).read():
            return int(open(path).read())
        time.sleep(0.05)
    raise AssertionError("%s not written" % path)


def test_a_symlinked_log_path_is_not_followed(tmp_path):
    target = victim(tmp_path)
    log = str(tmp_path / "probe.log")
    os.symlink(target, log)
    proc = ProbeProcess(["/bin/true"], dict(os.environ), log_path=log, watchdog=False)
    with pytest.raises(OSError) as e:
        with proc:
            pass
    assert "Too many levels of symbolic links" in str(e.value)
    assert open(target).read() == "precious\n" and proc.proc is None


def test_a_daemon_that_leaves_the_session_does_not_survive(tmp_path):
    pidfile = str(tmp_path / "daemon.pid")
    proc = ProbeProcess([sys.executable, "-c", DAEMON, pidfile], dict(os.environ), watchdog=False)
    with proc:
        daemon = wait_for_file(pidfile)
        assert os.getsid(daemon) != proc.sid  # it left the probe's session
        assert daemon in proc.members()
    assert proc.leftover == [] and not alive(daemon)


def test_a_killed_module_leaves_no_process_and_no_log(tmp_path):
    """The module (here a child running ProbeProcess) is SIGKILLed: the watchdog kills the daemon
    that left the session, and the log was unlinked when it was opened."""
    pidfile = str(tmp_path / "daemon.pid")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    runner = (
        "import sys, time\n"
        "from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.process import ProbeProcess\n"
        "p = ProbeProcess([sys.executable, '-c', sys.argv[1], sys.argv[2]], None)\n"
        "p.start()\n"
        "time.sleep(600)\n")
    env = dict(os.environ, TMPDIR=str(tmp))
    module = subprocess.Popen([sys.executable, "-c", runner, DAEMON, pidfile], env=env)
    try:
        daemon = wait_for_file(pidfile)
        time.sleep(1.2)  # the watchdog has seen it
        assert os.listdir(str(tmp)) == []
        os.kill(module.pid, signal.SIGKILL)
        module.wait(10)
        end = time.time() + 10
        while alive(daemon) and time.time() < end:
            time.sleep(0.1)
        assert not alive(daemon)
        assert os.listdir(str(tmp)) == []
    finally:
        if module.poll() is None:
            module.kill()
