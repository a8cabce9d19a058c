# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's cache file: validate, load, store and lock. The only reader of its format (the probe and
``service_status`` both read it here).

The file is a JSON mapping ``{fingerprint: entry}`` under ``facts.d``; each entry holds the keys of
:data:`CACHED_KEYS` and ``schema``. Beside the entries, the section :data:`MAMBA_SECTION` holds the Mamba cache
blocks M vLLM reported when it refused ``--max-num-seqs`` (``{key: record}``, the key of
``mamba_clamp.cache_key_of``: the service fingerprint plus the inputs that change M). It is written atomically,
and opened only through probe_trust.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import copy
import errno
import fcntl
import json
import os
import tempfile
import time

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_log import check_block_size
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.probe_trust import (
    UntrustedPath,
    make_dirs,
    open_trusted,
    trusted_uids,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.mamba_clamp import MAMBA_SECTION
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.redact import redact
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.errors import (
    CacheFileError,
    CacheLockTimeout,
    ProbeFailed,
)

# the result keys an entry keeps (and a cache hit returns)
CACHED_KEYS = ("vllm_block_size", "outcome", "reason", "vllm_version", "platform", "fingerprint",
               "service_fingerprint", "inputs", "log_line", "reports", "padding_pct", "cmd",
               "probe_mode", "shrink_reason", "probed_at", "probe_elapsed_s", "journal", "launcher",
               "launch_cmd", "line_elapsed_s", "hardware", "user")
CACHE_SCHEMA = 2
# how many records of the Mamba cache blocks M vLLM reported the section MAMBA_SECTION keeps
MAMBA_KEEP = 20


def validate_entry(fingerprint, entry, fingerprint_version=None, compute=None):
    """None when ``entry`` is a usable cache entry under ``fingerprint``, else the reason.

    An entry must be a mapping with ``schema`` == CACHE_SCHEMA, a positive integer
    ``vllm_block_size``, and ``inputs`` whose ``fingerprint_version`` is the current one and
    whose fingerprint (``compute(inputs)``, when given) is the key it is stored under: an entry
    copied from another host or edited by hand does not match its key. Returns ``"stale"`` for a
    well-formed entry of an older schema or fingerprint version (not worth a warning)."""
    if not isinstance(entry, dict):
        return "is not a mapping"
    inputs = entry.get("inputs")
    version = inputs.get("fingerprint_version") if isinstance(inputs, dict) else None
    if isinstance(version, bool) or not isinstance(version, int):
        return "has no fingerprint inputs with a fingerprint_version"
    if fingerprint_version is not None and version < fingerprint_version:
        return "stale"
    if fingerprint_version is not None and version != fingerprint_version:
        return "has the unknown fingerprint_version %r" % (version,)
    if entry.get("schema") != CACHE_SCHEMA:
        return "has the unknown schema %r" % (entry.get("schema"),)
    n = entry.get("vllm_block_size")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return "has vllm_block_size=%r, not a positive integer" % (n,)
    why = check_block_size(n, inputs.get("platform"), inputs.get("vllm_version"))
    if why is not None:
        return "has %s" % why
    if compute is not None:
        try:
            actual = compute(inputs)
        except Exception as e:  # any malformed inputs
            return "has inputs that cannot be fingerprinted (%s)" % e
        if actual != fingerprint:
            return "is stored under %s but its inputs fingerprint to %s" % (fingerprint[:12], actual[:12])
    return None


MAX_CACHE_BYTES = 4 * 1024 * 1024


def read_cache_file(path, uids=None):
    """The raw mapping of the cache file; {} when absent. Raises CacheFileError when the file
    exists but is not a JSON mapping, UntrustedPath when it is a symlink, not a regular file, or
    owned by another user or writable by group/other (probe_trust; ``uids`` the trusted owners)."""
    try:
        fd = open_trusted(path, os.O_RDONLY, uids or trusted_uids())
    except (IOError, OSError) as e:
        raise CacheFileError("cannot read %s: %s" % (path, e))
    if fd is None:
        return {}
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_CACHE_BYTES + 1)
    if len(raw) > MAX_CACHE_BYTES:
        raise CacheFileError("%s is larger than %d bytes" % (path, MAX_CACHE_BYTES))
    return parse(raw.decode("utf-8", "replace"), path)


def parse(text, path="the cache file"):
    """The raw mapping of a cache file's text; {} when empty. CacheFileError when it is not a JSON mapping."""
    if not (text or "").strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CacheFileError("%s is not valid JSON (%s)" % (path, e))
    if not isinstance(data, dict):
        raise CacheFileError("%s holds a JSON %s, not a mapping of fingerprints" % (path, type(data).__name__))
    return data


def status_entries(text):
    """The entries of a cache file's text that hold an N, for the status report: {} for an unreadable
    file (status shows what it can and never fails on the cache)."""
    try:
        data = parse(text)
    except CacheFileError:
        return {}
    return dict((k, v) for k, v in data.items() if isinstance(v, dict) and "vllm_block_size" in v)


def mamba_record_problem(record):
    """None when ``record`` is a usable M record (``mamba_cache_blocks`` a non-negative integer), else why."""
    if not isinstance(record, dict):
        return "is not a mapping"
    blocks = record.get("mamba_cache_blocks")
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 0:
        return "has mamba_cache_blocks=%r, not a non-negative integer" % (blocks,)
    return None


def mamba_records(data):
    """The valid M records of a cache file's raw mapping (``{key: record}``); {} when it has none."""
    section = data.get(MAMBA_SECTION) if isinstance(data, dict) else None
    if not isinstance(section, dict):
        return {}
    return dict((k, v) for k, v in section.items() if mamba_record_problem(v) is None)


def status_mamba(text):
    """The M records of a cache file's text, for the status report: {} for an unreadable file."""
    try:
        return mamba_records(parse(text))
    except CacheFileError:
        return {}


def _read_or_warn(path, uids, warnings):
    """The raw mapping of the cache file, {} (with a warning) when it cannot be read or parsed."""
    try:
        return read_cache_file(path, uids)
    except CacheFileError as e:
        if warnings is not None:
            warnings.append("%s; ignored, the host is probed again and the file rewritten" % e)
        return {}


def load_cache(path, fingerprint_version=None, compute=None, warnings=None, uids=None):
    """{fingerprint: entry} of the valid entries of the cache file.

    An unreadable or unparsable file counts as empty, and every entry that
    :func:`validate_entry` refuses (other than stale ones) is left out; both add a sentence to
    ``warnings`` (a list) when given. Stale entries are kept out silently. An untrusted file raises
    UntrustedPath (it is neither read nor overwritten)."""
    return valid_entries(_read_or_warn(path, uids, warnings), path, fingerprint_version, compute, warnings)


def valid_entries(data, path, fingerprint_version=None, compute=None, warnings=None):
    """{fingerprint: entry} of a cache file's raw mapping (``load_cache``), its M section left out."""
    out = {}
    for key, entry in data.items():
        if key == MAMBA_SECTION:
            continue
        why = validate_entry(key, entry, fingerprint_version, compute)
        if why is None:
            out[key] = entry
        elif why != "stale" and warnings is not None:
            warnings.append("ignored the cache entry %s of %s: it %s; the host is probed again"
                            % (str(key)[:12], path, why))
    return out


def store_cache(path, cache, fingerprint, entry, keep=20, mover=None, uids=None, mamba=None):
    """Add entry under fingerprint (with ``schema``; no entry when ``fingerprint`` is None), keep the newest
    ``keep`` entries and the M records ``mamba`` (the section :data:`MAMBA_SECTION`, when given), write the
    file atomically: a temporary file in the same directory, fsynced, then moved over the old one
    by ``mover(src, dest)`` (``AnsibleModule.atomic_move``, which keeps the file's owner and
    SELinux context) or ``os.rename``. Mode 0644, parents created 0755. The directory chain and an
    existing file must be trusted (probe_trust), else UntrustedPath. Returns the new cache."""
    new = copy.deepcopy(cache)
    if fingerprint is not None:
        new[fingerprint] = dict(entry, schema=CACHE_SCHEMA)
    if keep and len(new) > keep:
        ordered = sorted(new.items(), key=lambda kv: kv[1].get("probed_at", ""), reverse=True)
        keep_keys = set(k for k, _v in ordered[:keep]) | {fingerprint}
        new = dict((k, v) for k, v in new.items() if k in keep_keys)
    written = new
    if mamba:
        newest = sorted(mamba.items(), key=lambda kv: kv[1].get("reported_at", ""), reverse=True)[:MAMBA_KEEP]
        written = dict(new, **{MAMBA_SECTION: dict(newest)})
    parent = os.path.dirname(os.path.abspath(path))
    uids = uids or trusted_uids()
    make_dirs(parent, uids)
    if os.path.lexists(path):
        existing = open_trusted(path, os.O_RDONLY, uids)
        if existing is not None:
            os.close(existing)
    fd, tmp = tempfile.mkstemp(prefix=".vllm_block_size.", dir=parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(written, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        if mover is not None:
            mover(tmp, path)
        else:
            os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return new


class CacheLock(object):
    """Exclusive ``fcntl.flock`` on ``<cache>.lock`` beside the cache file, so that concurrent
    probes on one host run one after another (the second then finds the first one's entry).
    ``timeout`` bounds the wait (CacheLockTimeout)."""

    def __init__(self, cache_path, timeout=900.0, poll=0.2, uids=None):
        self.path = os.path.abspath(cache_path) + ".lock"
        self.uids = uids or trusted_uids()
        self.timeout = float(timeout)
        self.poll = poll
        self.fd = None
        self.waited = 0.0

    def __enter__(self):
        # no symlink followed, a trusted directory chain and file: else UntrustedPath, nothing truncated
        self.fd = open_trusted(self.path, os.O_RDWR | os.O_CREAT, self.uids, mode=0o644, create_dirs=True)
        start = time.time()
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except (IOError, OSError) as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(self.fd)
                    self.fd = None
                    raise
            if time.time() - start >= self.timeout:
                os.close(self.fd)
                self.fd = None
                raise CacheLockTimeout(
                    "another block size probe holds %s since more than %s s (lock_timeout)"
                    % (self.path, int(self.timeout)))
            time.sleep(self.poll)
        self.waited = time.time() - start
        try:
            os.ftruncate(self.fd, 0)
            os.write(self.fd, ("%d\n" % os.getpid()).encode("ascii"))
        except OSError:
            pass
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None
        return False


class ProbeCache(object):
    """The cache as the probe module uses it: entries loaded once under the lock, warnings passed to
    ``warn``, refusals raised as ProbeFailed, a failed write only warned about."""

    def __init__(self, path, uids, keep=20, mover=None, warn=None, fingerprint_version=None, compute=None):
        self.path, self.uids, self.keep, self.mover = path, uids, keep, mover
        self.warn = warn or (lambda msg: None)
        self.fingerprint_version, self.compute = fingerprint_version, compute
        self.entries, self.mamba = {}, {}

    def load(self):
        """Read the valid entries; returns the warnings (also passed to ``warn``)."""
        warnings = []
        try:
            data = _read_or_warn(self.path, self.uids, warnings)
        except UntrustedPath as e:
            raise ProbeFailed("refusing the cache: %s" % e)
        self.entries = valid_entries(data, self.path, self.fingerprint_version, self.compute, warnings)
        self.mamba = mamba_records(data)
        for w in warnings:
            self.warn(w)
        return warnings

    def get(self, fingerprint):
        return self.entries.get(fingerprint)

    @contextlib.contextmanager
    def locked(self, timeout):
        """The cache lock held (a CacheLock: its ``waited`` seconds); refusals raised as ProbeFailed."""
        lock = CacheLock(self.path, timeout=timeout, uids=self.uids)
        try:
            lock.__enter__()
        except UntrustedPath as e:
            raise ProbeFailed("refusing the cache lock: %s" % e)
        except (IOError, OSError) as e:
            raise ProbeFailed("cannot lock the cache %s: %s" % (self.path, e))
        try:
            yield lock
        finally:
            lock.__exit__(None, None, None)

    def store(self, entry):
        """Store ``entry`` (its CACHED_KEYS, redacted) under its fingerprint. True when written."""
        cache_entry = redact(dict((k, entry[k]) for k in CACHED_KEYS if k in entry))
        return self._write(entry["fingerprint"], cache_entry)

    def store_mamba(self, key, record):
        """Store an M record (``mamba_cache_blocks`` ...) under ``key`` (the entries stay). True when written."""
        self.mamba = dict(self.mamba, **{key: dict(record)})
        return self._write(None, None)

    def _write(self, fingerprint, cache_entry):
        try:
            self.entries = store_cache(self.path, self.entries, fingerprint, cache_entry, keep=self.keep,
                                       mover=self.mover, uids=self.uids, mamba=self.mamba)
            return True
        except UntrustedPath as e:
            raise ProbeFailed("refusing to write the cache: %s" % e)
        except (IOError, OSError) as e:
            self.warn("could not write the cache file %s: %s" % (self.path, e))
            return False
