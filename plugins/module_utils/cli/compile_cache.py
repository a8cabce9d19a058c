# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warm first start: which compile caches a group's first started host gives the others, and when not.

A cold vLLM start compiles (torch.compile and its AOT cache, the Triton kernels, FlashInfer's JIT); a
warm one reads the results from the service's cache directories. The caches of a group's first
started host are copied to the group's other hosts before their first start, only when the cache key
of the source and of the target are equal: the vLLM version, the GPU architecture and driver, the
model, and every vLLM flag and environment variable that can change the compiled graph.

Pure logic:

``cache_dirs(home, cache_root)``
    The directories copied (absolute paths on the host), from the unit's HOME and VLLM_CACHE_ROOT.
``home_relative_dirs(home, cache_root)``
    The same directories relative to HOME (the tarball's layout).
``graph_argv(argv)``
    The vLLM argv without the flags that cannot change the compiled graph (addresses, names, keys,
    logging). Everything else is kept: an unknown flag refuses a copy rather than risking one.
``cache_key(vllm_version, gpu_architecture, driver_version, model, argv, env)`` / ``key_hash(key)``
    The key (a dict) and its hash, which names the tarball.
``seed_decision(source_host, source_key, target_host, target_key)``
    ``(True, sentence)`` or ``(False, sentence naming each part of the key that differs)``.
``tarball_name(key)`` / ``transfer_report(host, source_host, size_bytes, seconds)``
``architecture(hardware)``
    The key's architecture from the probe's hardware identity: the GPUs' architectures, or on a CPU host
    the machine, the CPU model and its ISA flags (the CPU kernels are compiled for them).
``start_batches(groups, batch_size)`` / ``start_serial(first_count, later_count, serial)``
    The first start's batches: every group's first host alone, then the others; ``start_serial`` gives
    them as the play keyword ``serial`` of a play whose hosts list the groups' first hosts first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import canonical_json, relevant_env, sha256_bytes

# Relative to VLLM_CACHE_ROOT, then to HOME.
CACHE_ROOT_DIRS = ("torch_compile_cache", "torch_aot_compile")
HOME_DIRS = (".triton/cache", ".cache/flashinfer")

# vLLM flags (with a value) that never change the compiled graph.
SERVING_ONLY_FLAGS = frozenset((
    "--host", "--port", "--served-model-name", "--api-key", "--uvicorn-log-level", "--root-path",
    "--allowed-origins", "--allowed-methods", "--allowed-headers", "--ssl-keyfile", "--ssl-certfile",
    "--ssl-ca-certs", "--middleware", "--max-log-len", "--download-dir", "--kv-transfer-config",
))
# vLLM switches (without a value) that never change the compiled graph.
SERVING_ONLY_SWITCHES = frozenset((
    "--disable-log-requests", "--enable-log-requests", "--disable-log-stats", "--disable-uvicorn-access-log",
    "--disable-fastapi-docs", "--enable-prompt-tokens-details",
))

# "home": vLLM's compile hash covers VLLM_CONFIG_ROOT and VLLM_XLA_CACHE_PATH, which default from HOME, so a
# seed unpacked under another HOME path is ignored and recompiled (measured on an H200, docs/gpu.md).
KEY_PARTS = ("vllm_version", "gpu_architecture", "driver_version", "model", "argv", "env", "home")


def cache_dirs(home, cache_root):
    """The compile caches of a vLLM unit (absolute paths)."""
    return ([posixpath.join(cache_root, d) for d in CACHE_ROOT_DIRS]
            + [posixpath.join(home, d) for d in HOME_DIRS])


def home_relative_dirs(home, cache_root):
    """The cache directories relative to HOME (how the tarball holds them: another host's HOME may differ).

    Raises ValueError when VLLM_CACHE_ROOT is not below HOME (the plan puts it at <HOME>/cache)."""
    home = posixpath.normpath(home)
    out = []
    for path in cache_dirs(home, cache_root):
        relative = posixpath.relpath(posixpath.normpath(path), home)
        if relative.startswith(".."):
            raise ValueError("VLLM_CACHE_ROOT=%s is not below HOME=%s" % (cache_root, home))
        out.append(relative)
    return out


def graph_argv(argv):
    """The flags of ``argv`` (vllm serve ... as the unit runs it) that can change the compiled graph.

    The executable, ``serve`` and the model (a key part of its own) are dropped, and so are the
    serving-only flags and switches; ``--flag=value`` counts as ``--flag value``."""
    args = list(argv or [])
    if len(args) >= 2 and args[1] == "serve":
        args = args[3:] if len(args) > 2 and not args[2].startswith("--") else args[2:]
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in SERVING_ONLY_FLAGS:
            skip = "=" not in arg
            continue
        if flag in SERVING_ONLY_SWITCHES:
            continue
        out.append(arg)
    return out


def cache_key(vllm_version, gpu_architecture, driver_version, model, argv, env=None, home=None):
    """The key two hosts' compile caches must share (a dict); ``home`` is the unit's HOME path."""
    return {
        "vllm_version": str(vllm_version or ""),
        "gpu_architecture": str(gpu_architecture or ""),
        "driver_version": str(driver_version or ""),
        "model": model,
        "argv": graph_argv(argv),
        "env": relevant_env(env),
        "home": str(home or ""),
    }


def architecture(hardware):
    """The architecture part of the key from ``hardware.hardware_identity`` (a dict, or None)."""
    hardware = hardware if isinstance(hardware, dict) else {}
    gpus = hardware.get("gpus") or []
    if gpus:
        return ",".join(sorted(set(str(g.get("architecture") or g.get("compute_cap")) for g in gpus)))
    if not hardware:
        return ""
    return "%s %s [%s]" % (hardware.get("machine") or "", hardware.get("cpu_model") or "",
                           " ".join(sorted(str(flag) for flag in hardware.get("isa") or [])))


def key_hash(key):
    return sha256_bytes(canonical_json(key).encode("utf-8"))


def tarball_name(key):
    """The tarball's name on the control node: one per key."""
    return "vllm-compile-cache-%s.tar.gz" % key_hash(key)[:16]


def _options(args):
    """``['--a', '1', '--b']`` -> ``['--a 1', '--b']`` (a flag with its value, for the messages)."""
    out = []
    for arg in args or []:
        if out and not arg.startswith("--") and out[-1].startswith("--") and " " not in out[-1]:
            out[-1] = "%s %s" % (out[-1], arg)
        else:
            out.append(arg)
    return out


def _differences(source, target):
    out = []
    for part in KEY_PARTS:
        a, b = source.get(part), target.get(part)
        if a == b:
            continue
        if part == "argv":
            a, b = _options(a), _options(b)
            only_a = [x for x in a if x not in b]
            only_b = [x for x in b if x not in a]
            out.append("the flags that change the compiled graph (%s here, %s there)"
                       % (" ".join(only_b) or "none", " ".join(only_a) or "none"))
        elif part == "env":
            keys = sorted(set(a or {}) ^ set(b or {}) | set(k for k in (a or {}) if k in (b or {}) and a[k] != b[k]))
            out.append("the environment (%s)" % ", ".join(keys))
        else:
            out.append("%s (%s here, %s there)" % (part, canonical_json(b), canonical_json(a)))
    return out


def seed_decision(source_host, source_key, target_host, target_key):
    """(copy or not, the sentence that says why)."""
    differences = _differences(source_key, target_key)
    if not differences:
        return True, ("host %s: seeded with the compile caches of %s (key %s)"
                      % (target_host, source_host, key_hash(target_key)[:12]))
    return False, ("host %s: the compile caches of %s are not copied, their key differs: %s; the host compiles "
                   "on its first start" % (target_host, source_host, "; ".join(differences)))


# What a host's key carries beside the parts that must match (KEY_PARTS): never compared.
KEY_EXTRAS = ("hash", "tarball", "relative_dirs", "user", "group")


def host_key(plan, probe_inputs):
    """The compile-cache key of a host: its plan's vLLM argv, environment and HOME and its probe inputs (vLLM version,
    model, hardware: GPU architecture and driver), with :data:`KEY_EXTRAS` (its hash, the tarball's name, the cache
    directories relative to HOME, the unit's user and group). ValueError when an input is missing or malformed."""
    if not isinstance(plan, dict) or not isinstance(probe_inputs, dict):
        raise ValueError("the host plan and the probe inputs (block_size_probe RV inputs) are needed")
    vllm = plan.get("vllm") or {}
    hardware = probe_inputs.get("hardware") or {}
    key = cache_key(probe_inputs.get("vllm_version"), architecture(hardware), hardware.get("driver_version"),
                    probe_inputs.get("model"), vllm.get("argv"), vllm.get("environment"), vllm.get("home"))
    try:
        relative = home_relative_dirs(vllm.get("home"), (vllm.get("environment") or {}).get("VLLM_CACHE_ROOT"))
    except TypeError as exc:
        raise ValueError(str(exc))
    return dict(key, hash=key_hash(key), tarball=tarball_name(key), relative_dirs=relative, user=vllm.get("user"),
                group=vllm.get("group"))


def seed_between(target_host, target_key, source_host, source_key):
    """(allowed, sentence): whether the caches of ``source_host`` (its :func:`host_key`) may seed ``target_host``."""
    def parts(key):
        return dict((k, v) for k, v in key.items() if k not in KEY_EXTRAS)
    return seed_decision(source_host, parts(source_key), target_host, parts(target_key))


def transfer_report(host, source_host, size_bytes, seconds):
    """What the deploy summary says about a copy (``host == source_host``: the pack on the first host)."""
    if host == source_host:
        return ("host %s: compile caches packed and fetched to the control node, %.1f MiB in %.1f s"
                % (host, (size_bytes or 0) / 1048576.0, seconds or 0.0))
    return ("host %s: compile caches of %s, %.1f MiB in %.1f s through the control node"
            % (host, source_host, (size_bytes or 0) / 1048576.0, seconds or 0.0))


def start_batches(groups, batch_size=None):
    """The rolling batches of a first start: every group's first host alone, then the others.

    ``groups``: the groups of ``hardware_groups.form_groups`` (the canary first). Returns a list of
    host lists: one batch of the canaries (each the only host of its group), then the others in
    batches of ``batch_size`` (all at once when None)."""
    firsts = [g["members"][0] for g in groups]
    rest = [h for g in groups for h in g["members"][1:]]
    batches = [firsts] if firsts else []
    size = batch_size or len(rest) or 1
    batches.extend(rest[i:i + size] for i in range(0, len(rest), size))
    return batches


def _serial_size(serial, total):
    """Ansible's size of one batch: a number, or a percentage of the play's hosts (at least 1)."""
    text = str(serial).strip()
    if text.endswith("%"):
        return max(1, int(float(text[:-1]) * total / 100.0))
    return int(text) if int(text) > 0 else total


def start_serial(first_count, later_count, serial="100%"):
    """The play keyword ``serial`` (a list) of a rollout whose hosts list every group's first host first.

    The first batches hold only first hosts (at most ``serial`` each), then the others go in batches of
    ``serial``: no host starts in the batch of its group's first host. ``serial`` is a number or a
    percentage of all hosts."""
    total = max(1, int(first_count) + int(later_count))
    size = max(1, _serial_size(serial, total))
    first = int(first_count)
    if first <= 0 or int(later_count) <= 0:
        return [size]
    batches = [size] * (first // size) + ([first % size] if first % size else [])
    return batches + [size]
