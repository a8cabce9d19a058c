# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch a throw-away ``vllm serve``, wait for the block size line, kill it.

vLLM ignores SIGTERM while its engine initialises and its EngineCore /
Worker / resource_tracker children survive a SIGKILL of the main process.
The only clean stop is SIGKILL of the whole process group, so the probe runs
vLLM in a new session (its own process group) and kills that group, then
every process left in the session, and waits until none is left.
A small watchdog process kills the group too if the probe itself dies
without cleaning up (e.g. SIGKILL of the Ansible module).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import copy
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size_log import (
    LogScanner,
    check_block_size,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.probe_containment import (
    WATCHDOG_SRC,
    all_procs,
    become_subreaper,
    stat_fields,
    contained,
    kill_contained,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.probe_trust import (
    make_dirs,
    open_trusted,
    trusted_uids,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.managed_flags import (
    SHRINK_BLOCKING_DESTS,
    reached,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.vllm_cli import (
    n_input_argv,
    n_inputs_of,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.vllm_cli_table import TABLE as VLLM_TABLE

# Settings (vLLM's option destinations) that the probe sets itself; extra_args that reach them by any
# spelling vLLM accepts are dropped (they would point the probe at production resources or break
# the cheap path).
PROBE_OWNED_DESTS = frozenset(("host", "port", "uds", "kv_transfer_config", "load_format", "api_key",
                               "served_model_name", "ssl_keyfile", "ssl_certfile"))
# extra_args that make the shrunken probe unsafe (they change the model shape themselves, depend on
# the layer count or add a draft model): managed_flags.SHRINK_BLOCKING_DESTS.

SHRINK_LAYERS = 4
# vocabulary and dense MLP width of the shrunken model (neither enters N)
SHRINK_VOCAB = 4096
SHRINK_INTERMEDIATE = 512
# config keys of mixture-of-experts MLPs (their widths are left alone)
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")
HYBRID_LINEAR = "linear_attention"
HYBRID_FULL = "full_attention"

DEFAULT_MAX_NUM_BATCHED_TOKENS = 16384
DEFAULT_MAX_MODEL_LEN = 4096
DEFAULT_GPU_MEMORY_UTILIZATION = 0.3


# --------------------------------------------------------------------------
# pure helpers
# --------------------------------------------------------------------------

def _flag_name(arg):
    return arg.split("=", 1)[0]


def _reaches(arg, dests):
    """True when ``arg`` reaches one of vLLM's option destinations ``dests`` by any accepted spelling."""
    options = VLLM_TABLE["options"]
    return any(options[option][0] in dests for option in reached(arg, VLLM_TABLE))


def filter_extra_args(extra_args):
    """Split extra_args into (kept, dropped); dropped are probe-owned flags
    (with their value), however abbreviated."""
    kept, dropped = [], []
    args = [str(a) for a in (extra_args or [])]
    i = 0
    while i < len(args):
        arg = args[i]
        if _reaches(arg, PROBE_OWNED_DESTS):
            if "=" in arg or i + 1 >= len(args) or args[i + 1].startswith("-"):
                dropped.append(arg)
                i += 1
            else:
                dropped.extend([arg, args[i + 1]])
                i += 2
            continue
        kept.append(arg)
        i += 1
    return kept, dropped


def text_config_path(config):
    """('text_config', sub-dict) for multimodal configs, ('', config) else."""
    if isinstance(config.get("text_config"), dict):
        return "text_config", config["text_config"]
    return "", config


def shrink_overrides(config, extra_args=None, speculative_config=None, tensor_parallel_size=1,
                     skip_tokenizer_init=True):
    """``--hf-overrides`` dict that cuts the language model to 4 layers while
    keeping both linear_attention and full_attention layers, or
    (None, reason) when the config cannot be shrunk safely.

    N depends on the per-layer state and KV shapes (KV heads, head size, the
    linear-attention heads and dims, the conv kernel, the dtypes), not on the
    layer count, the vocabulary or the MLP width. So, unless the checkpoint is
    quantized, the shrink also cuts the vocabulary to 4096 tokens (only without
    a tokenizer, --skip-tokenizer-init) and a dense MLP to 512 (not for MoE
    configs, and only when the tensor-parallel size divides 512). The shrunken
    model prints the same N at a fraction of the memory and start-up time.
    """
    if not isinstance(config, dict):
        return None, "no readable config.json (hub model or unreadable file)"
    for arg in extra_args or []:
        if _reaches(str(arg), SHRINK_BLOCKING_DESTS):
            return None, "extra_args set %s" % _flag_name(str(arg))
    if speculative_config:
        return None, "speculative decoding configured (draft layers follow the target's layout)"
    key, text = text_config_path(config)
    layers = text.get("num_hidden_layers")
    if not isinstance(layers, int) or layers <= SHRINK_LAYERS:
        return None, "model has %s layers; nothing to shrink" % (layers,)
    overrides = {"num_hidden_layers": SHRINK_LAYERS}
    layer_types = text.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        kinds = set(layer_types)
        if not kinds <= {HYBRID_LINEAR, HYBRID_FULL}:
            return None, "layer_types has kinds other than linear/full attention: %s" % sorted(kinds)
        if kinds != {HYBRID_LINEAR, HYBRID_FULL}:
            return None, "layer_types does not mix linear_attention and full_attention"
        head = list(layer_types[:SHRINK_LAYERS])
        if set(head) != {HYBRID_LINEAR, HYBRID_FULL}:
            head = [HYBRID_LINEAR] * (SHRINK_LAYERS - 1) + [HYBRID_FULL]
        overrides["layer_types"] = head
    else:
        interval = text.get("full_attention_interval")
        if not isinstance(interval, int) or not 2 <= interval <= SHRINK_LAYERS:
            return None, "no layer_types and no full_attention_interval <= %d" % SHRINK_LAYERS
        per_layer = ("layers_block_type", "hybrid_override_pattern", "attn_layer_indices")
        if any(k in text for k in per_layer) or text.get("mlp_only_layers") \
                or text.get("decoder_sparse_step", 1) not in (None, 1):
            return None, "config defines its layer layout in a way the shrink does not handle"
    cuts = ["%d layers" % SHRINK_LAYERS]
    quantized = "quantization_config" in config or "quantization_config" in text
    if not quantized:
        vocab = text.get("vocab_size")
        if skip_tokenizer_init and isinstance(vocab, int) and vocab > SHRINK_VOCAB:
            overrides["vocab_size"] = SHRINK_VOCAB
            cuts.append("vocabulary %d" % SHRINK_VOCAB)
        width = text.get("intermediate_size")
        tp = int(tensor_parallel_size or 1)
        if isinstance(width, int) and width > SHRINK_INTERMEDIATE and SHRINK_INTERMEDIATE % tp == 0 \
                and not any(text.get(k) for k in MOE_KEYS):
            overrides["intermediate_size"] = SHRINK_INTERMEDIATE
            cuts.append("MLP %d" % SHRINK_INTERMEDIATE)
    where = (" %s" % key) if key else ""
    if key:
        overrides = {key: overrides}
    return overrides, "shrunk%s to %s" % (where, ", ".join(cuts))


def build_probe_argv(vllm_executable, model, port, extra_args=None, max_model_len=None,
                     gpu_memory_utilization=None, max_num_batched_tokens=None, language_model_only=True,
                     skip_tokenizer_init=True, hf_overrides=None, host="127.0.0.1", **n_inputs):
    """argv of the probe launch.

    Production-relevant flags (the inputs of N, ``n_inputs`` by name: vllm_cli.N_INPUTS) are
    passed only when they differ from vLLM's default, exactly as given; the cheap flags keep the
    launch small; extra_args come after them so they win over the cheap flags; the loopback
    ``--host`` and ``--port`` come last (argparse keeps the last value).
    """
    argv = [vllm_executable, "serve", model,
            "--enable-prefix-caching", "--mamba-cache-mode", "align",
            "--load-format", "dummy", "--enforce-eager",
            "--max-model-len", str(max_model_len or DEFAULT_MAX_MODEL_LEN),
            "--gpu-memory-utilization", str(gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION),
            "--max-num-batched-tokens", str(max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS),
            "--max-num-seqs", "4"]
    if language_model_only:
        argv.append("--language-model-only")
    if skip_tokenizer_init:
        argv.append("--skip-tokenizer-init")
    argv += n_input_argv(n_inputs_of(n_inputs), explicit=False)
    if hf_overrides:
        argv += ["--hf-overrides", json.dumps(hf_overrides, separators=(",", ":"))]
    argv += [str(a) for a in (extra_args or [])]
    # last, so that nothing before them (extra_args, a config file of flags) rebinds the probe
    return argv + ["--host", host, "--port", str(port)]


# The engine launcher: one process that builds vLLM's engine from the same ``vllm serve``
# command line, without the API server and without the EngineCore process (with TP>1 the
# workers are still processes of their own). vLLM's own parser (make_arg_parser), engine
# arguments (AsyncEngineArgs.from_cli_args) and engine config (create_engine_config with the
# API server's usage context) are used, then the executor vLLM would use is built in this
# process; its worker loads the (dummy) model and vLLM computes and logs N exactly as it does
# under ``vllm serve``. The launcher then prints ENGINE_BUILT and exits. Exit status 3 with
# ENGINE_UNSUPPORTED: this vLLM lacks an API the launcher needs (the module falls back to
# ``vllm serve``).
ENGINE_LAUNCHER_SRC = r"""
import os, sys, time
UNSUPPORTED = 'fleet-probe: engine launcher unsupported: '
def main():
    t0 = time.time()
    # keep the engine core in this process (vLLM's CPU platform then keeps the
    # uniprocess executor for TP=1)
    os.environ['VLLM_ENABLE_V1_MULTIPROCESSING'] = '0'
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        try:
            from vllm.utils import FlexibleArgumentParser
        except ImportError as e:
            print(UNSUPPORTED + repr(e), flush=True)
            sys.exit(3)
    try:
        try:
            from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
        except ImportError:
            from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.executor import Executor
    except ImportError as e:
        print(UNSUPPORTED + repr(e), flush=True)
        sys.exit(3)
    try:
        from vllm.plugins import load_general_plugins
    except ImportError:
        load_general_plugins = None
    # what the vllm CLI does before and after it parses a subcommand's arguments
    try:
        from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
        cli_env_setup()
    except ImportError:
        os.environ.setdefault('VLLM_WORKER_MULTIPROC_METHOD', 'spawn')
    parser = make_arg_parser(FlexibleArgumentParser(prog='vllm serve'))
    args = parser.parse_args(sys.argv[1:])
    if getattr(args, 'model_tag', None) is not None:
        args.model = args.model_tag
    try:
        from vllm.logger import configure_logging_from_args
        configure_logging_from_args(args)
    except ImportError:
        pass
    validate_parsed_serve_args(args)
    if load_general_plugins is not None:
        load_general_plugins()
    world = int(getattr(args, 'tensor_parallel_size', 1) or 1) * int(getattr(args, 'pipeline_parallel_size', 1) or 1)
    if world == 1:
        # vLLM inspects the model class in a child interpreter (a fourth vLLM import) to keep
        # CUDA out of the API server; here the engine runs in this process anyway.
        try:
            from vllm.model_executor.models import registry
            if hasattr(registry, '_run_in_subprocess'):
                registry._run_in_subprocess = lambda fn: fn()
        except ImportError:
            pass
    engine_args = AsyncEngineArgs.from_cli_args(args)
    config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    executor_class = Executor.get_class(config)
    print('fleet-probe: building the engine with %s after %.1f s' % (executor_class.__name__, time.time() - t0), flush=True)
    executor_class(config)
    model = config.model_config
    print('fleet-probe: engine built: block_size=%d hybrid=%s after %.1f s' % (
        config.cache_config.block_size, bool(getattr(model, 'is_hybrid', False)), time.time() - t0), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
if __name__ == '__main__':
    main()
"""


def engine_launcher_argv(python, serve_argv):
    """argv of the engine launcher from the argv of ``vllm serve`` (``[vllm, 'serve', model,
    flags...]``): the same model and flags, run by the venv's python. --host / --port are the
    API server's own and are dropped."""
    if len(serve_argv) < 3 or serve_argv[1] != "serve":
        raise ValueError("not a vllm serve argv: %r" % (serve_argv[:3],))
    rest, i = [], 3
    while i < len(serve_argv):
        arg = serve_argv[i]
        if arg in ("--host", "--port"):
            i += 2
            continue
        if arg.startswith(("--host=", "--port=")):
            i += 1
            continue
        rest.append(arg)
        i += 1
    return [python, "-c", ENGINE_LAUNCHER_SRC, serve_argv[2]] + rest


def user_identity(user=None, group=None):
    """(uid, gid, supplementary gids, passwd entry or None) for running the probe as ``user``
    (a name or a number) and ``group`` (default: the user's primary group). Raises KeyError
    with a sentence when the user or group does not exist."""
    import grp
    import pwd
    if user in (None, ""):
        return None
    try:
        pw = pwd.getpwuid(int(user)) if str(user).isdigit() else pwd.getpwnam(str(user))
    except KeyError:
        raise KeyError("user %s does not exist on this host" % user)
    if group in (None, ""):
        gid = pw.pw_gid
    else:
        try:
            gid = grp.getgrgid(int(group)).gr_gid if str(group).isdigit() else grp.getgrnam(str(group)).gr_gid
        except KeyError:
            raise KeyError("group %s does not exist on this host" % group)
    try:
        groups = sorted(set(os.getgrouplist(pw.pw_name, gid)))
    except (AttributeError, OSError):
        groups = [gid]
    return {"uid": pw.pw_uid, "gid": gid, "groups": groups, "name": pw.pw_name, "home": pw.pw_dir,
            "shell": pw.pw_shell}


# the environment a systemd service starts from (systemd's default PATH); the probe of a
# service user gets this plus the service's env, not the connection user's environment
SERVICE_BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSED_THROUGH = ("LANG", "LC_ALL", "TZ")


def service_base_env(identity, parent_env=None):
    """Base environment of a probe run as a service user: HOME, USER, LOGNAME, SHELL of the
    user, systemd's default PATH, the parent's locale; nothing else of the parent (its HOME,
    tokens, proxies). The service's own variables come from the module's ``env``."""
    parent_env = parent_env if parent_env is not None else os.environ
    env = dict((k, parent_env[k]) for k in PASSED_THROUGH if k in parent_env)
    env.update(HOME=identity["home"], USER=identity["name"], LOGNAME=identity["name"],
               SHELL=identity.get("shell") or "/bin/sh", PATH=SERVICE_BASE_PATH)
    return env


def probe_env(base_env, user_env=None, platform="cuda", local_model=False):
    """Environment of the probe: base + user env + the probe's defaults."""
    env = dict(base_env or {})
    env.update(dict((str(k), str(v)) for k, v in (user_env or {}).items()))
    env["PYTHONUNBUFFERED"] = "1"
    # the line is printed at INFO; a WARNING level would hide it
    if env.get("VLLM_LOGGING_LEVEL", "INFO").upper() not in ("INFO", "DEBUG"):
        env["VLLM_LOGGING_LEVEL"] = "INFO"
    env.setdefault("VLLM_LOGGING_LEVEL", "INFO")
    env["VLLM_CONFIGURE_LOGGING"] = "1"
    # vLLM's own record format, which the probe reads N from (block_size_log.BLOCK_RECORD_RE)
    env["VLLM_LOGGING_PREFIX"] = ""
    env.pop("VLLM_LOGGING_CONFIG_PATH", None)
    env.setdefault("VLLM_LOGGING_COLOR", "0")
    env.setdefault("NO_COLOR", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    if platform == "cpu":
        # skips the CPU memory check and keeps the KV cache at 1 GiB
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    if local_model:
        env.setdefault("HF_HUB_OFFLINE", "1")
    return env


# --------------------------------------------------------------------------
# cache file
# --------------------------------------------------------------------------

CACHE_SCHEMA = 2


class CacheFileError(Exception):
    """The cache file exists but cannot be read as a cache (not JSON, not a mapping)."""


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
    raw = raw.decode("utf-8", "replace")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise CacheFileError("%s is not valid JSON (%s)" % (path, e))
    if not isinstance(data, dict):
        raise CacheFileError("%s holds a JSON %s, not a mapping of fingerprints" % (path, type(data).__name__))
    return data


def load_cache(path, fingerprint_version=None, compute=None, warnings=None, uids=None):
    """{fingerprint: entry} of the valid entries of the cache file.

    An unreadable or unparsable file counts as empty, and every entry that
    :func:`validate_entry` refuses (other than stale ones) is left out; both add a sentence to
    ``warnings`` (a list) when given. Stale entries are kept out silently. An untrusted file raises
    UntrustedPath (it is neither read nor overwritten)."""
    try:
        data = read_cache_file(path, uids)
    except CacheFileError as e:
        if warnings is not None:
            warnings.append("%s; ignored, the host is probed again and the file rewritten" % e)
        return {}
    out = {}
    for key, entry in data.items():
        why = validate_entry(key, entry, fingerprint_version, compute)
        if why is None:
            out[key] = entry
        elif why != "stale" and warnings is not None:
            warnings.append("ignored the cache entry %s of %s: it %s; the host is probed again"
                            % (str(key)[:12], path, why))
    return out


def store_cache(path, cache, fingerprint, entry, keep=20, mover=None, uids=None):
    """Add entry under fingerprint (with ``schema``), keep the newest ``keep`` entries, write the
    file atomically: a temporary file in the same directory, fsynced, then moved over the old one
    by ``mover(src, dest)`` (``AnsibleModule.atomic_move``, which keeps the file's owner and
    SELinux context) or ``os.rename``. Mode 0644, parents created 0755. The directory chain and an
    existing file must be trusted (probe_trust), else UntrustedPath. Returns the new cache."""
    new = copy.deepcopy(cache)
    entry = dict(entry)
    entry["schema"] = CACHE_SCHEMA
    new[fingerprint] = entry
    if keep and len(new) > keep:
        ordered = sorted(new.items(), key=lambda kv: kv[1].get("probed_at", ""), reverse=True)
        keep_keys = set(k for k, _v in ordered[:keep]) | {fingerprint}
        new = dict((k, v) for k, v in new.items() if k in keep_keys)
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
            json.dump(new, f, indent=2, sort_keys=True)
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


class CacheLockTimeout(Exception):
    pass


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


# --------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------

def free_port(host="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, 0))
        return s.getsockname()[1]
    finally:
        s.close()


# a process as /proc/<pid>/stat tells it; rss in bytes
ProcStat = collections.namedtuple("ProcStat", ["ppid", "pgid", "sid", "rss"])
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def proc_stat(pid):
    """ProcStat of a pid from /proc, or None (gone, or a zombie)."""
    fields = stat_fields(pid)
    # fields[0]=state, [1]=ppid, [2]=pgrp, [3]=session, [21]=rss in pages
    if not fields or fields[0] == "Z":
        return None  # gone, or a zombie: already dead, waits for its parent
    return ProcStat(int(fields[1]), int(fields[2]), int(fields[3]), int(fields[21]) * PAGE_SIZE)


def process_table():
    """{pid: ProcStat} of every live process (zombies left out)."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for d in names:
        if not d.isdigit():
            continue
        st = proc_stat(int(d))
        if st is not None:
            table[int(d)] = st
    return table


def process_tree(root, table):
    """root and its descendants in table (a process_table())."""
    children = {}
    for pid, st in table.items():
        children.setdefault(st.ppid, []).append(pid)
    seen, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, []))
    return seen


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


def kill_session(sid, timeout=10.0):
    """SIGKILL the process group sid and every process left in session sid;
    wait until none is alive. Returns the pids still alive (normally [])."""
    deadline = time.time() + timeout
    left = session_members(sid)
    while True:
        try:
            os.killpg(sid, signal.SIGKILL)
        except OSError:
            pass
        kill_pids(left)
        time.sleep(0.05)
        left = session_members(sid)
        if not left or time.time() > deadline:
            return left


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


class ProbeInterrupted(Exception):
    """The probe received SIGTERM / SIGINT / SIGHUP."""

    def __init__(self, signum):
        super(ProbeInterrupted, self).__init__("probe interrupted by signal %d" % signum)
        self.signum = signum


class ProbeResult(object):
    def __init__(self, status, scanner, elapsed, returncode=None, log_path=None):
        self.status = status        # found | ready | failed | exited | timeout
        self.scanner = scanner
        self.elapsed = elapsed
        self.returncode = returncode
        self.log_path = log_path
        self.line_elapsed = None
        self.leftover = []


class ProbeProcess(object):
    """One vLLM probe launch. Use as a context manager: __exit__ always kills
    the session, even on exceptions."""

    def __init__(self, argv, env, log_path=None, cwd=None, watchdog=True, identity=None, kill_timeout=10.0):
        """``identity``: a :func:`user_identity` dict to run vLLM as that user (uid, gid and
        supplementary groups); None runs it as the module's user. Without ``log_path`` the log
        lives in a private directory (0700) that :meth:`remove_log` deletes."""
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
        self.private_dir = None
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
        # daemons that leave the session are re-parented to this process (probe_containment)
        self.subreaper = become_subreaper()
        me = os.getpid()
        self.excluded = [p.pid for p in all_procs().values() if p.ppid == me]
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self._log_fh, stderr=subprocess.STDOUT,
            env=self.env, cwd=self.cwd, start_new_session=True, close_fds=True, **kwargs
        )
        self.sid = self.proc.pid
        self.seen_pids.add(self.sid)
        if self.use_watchdog:
            try:
                self.watchdog = subprocess.Popen(
                    [sys.executable, "-c", WATCHDOG_SRC, str(me), str(self.sid)] + [str(p) for p in self.excluded],
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
        return contained(os.getpid(), self.sid, self._excluded(), all_procs())

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

    def remove_log(self):
        """Nothing left to delete: a log the probe owns was unlinked when it was opened."""
        return None

    def wait_for_block_size(self, timeout, expected_ranks=1, poll=0.2, failed_grace=3.0,
                            padding_grace=1.0, clock=time.time):
        """Follow the log until the block size is known, vLLM is ready, fails,
        exits, or timeout seconds pass. Returns a ProbeResult (the process is
        still alive; call stop())."""
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
            if state == "found" and scanner.padding_pct is None and rc is None:
                # the "Padding mamba page size" line follows at once: give it a moment
                if found_at is None:
                    found_at = clock()
                if clock() - found_at < padding_grace and clock() < deadline:
                    time.sleep(min(poll, 0.05))
                    continue
            if state in ("found", "ready"):
                res = ProbeResult(state, scanner, clock() - start, rc, self.log_path)
                res.line_elapsed = line_elapsed
                return res
            if rc is not None:
                read_some(reader, scanner)
                scanner.flush()
                state = scanner.state(expected_ranks)
                status = state if state in ("found", "ready") else "exited"
                if status != "found" and scanner.block_lines:
                    status = "found"  # some ranks reported before the exit
                res = ProbeResult(status, scanner, clock() - start, rc, self.log_path)
                res.line_elapsed = line_elapsed
                return res
            if state == "failed":
                if failed_at is None:
                    failed_at = clock()
                elif clock() - failed_at >= failed_grace:
                    scanner.flush()
                    return ProbeResult("failed", scanner, clock() - start, None, self.log_path)
            if clock() >= deadline:
                scanner.flush()
                res = ProbeResult("timeout", scanner, clock() - start, None, self.log_path)
                res.line_elapsed = line_elapsed
                return res
            if clock() - last_note >= 1.0:
                self.note_members()
                last_note = clock()
            time.sleep(poll)
