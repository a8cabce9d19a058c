# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fingerprint of every input that changes vLLM's hybrid block size N.

Two probes with the same fingerprint print the same N, so the probe module
caches N under it. Pure helpers, plus two small file readers (config.json
hash, dist-info versions) that are cheap and free of side effects.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.redact import (
    REDACTED,
    is_secret_name,
    redact,
    redact_args,
    redact_text,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.vllm_cli import (
    N_INPUT_NAMES,
    n_input_values,
    n_inputs_of,
    normalize_json_option,
)

# 2: the hardware (GPU kind and driver, or CPU model and ISA flags) is an input.
# 3: environment values outside ENV_N_ALLOWLIST and secret-named flags' values are kept only as hashes.
FINGERPRINT_VERSION = 3

# Options of the probe module that enter the fingerprint, in this order: the inputs of N are vllm_cli's
# table (N_INPUT_NAMES); the extra arguments carry the inputs of N that have no variable (N_EXTRA_INPUTS).
FINGERPRINT_FIELDS = ("model", "vllm_version", "platform") + N_INPUT_NAMES + ("extra_args", "env", "probe_mode", "hardware")

# Environment variables that never change N: left out of the fingerprint.
# (The service's whole environment is passed to the probe: its locations, proxies, hub and
# telemetry settings, device selection - the GPUs enter through the hardware - and LMCache's own
# variables, whose connector the probe does not load, stay out.)
ENV_IGNORED_RE = re.compile(
    r"^(VLLM_LOGGING_\w+|VLLM_CONFIGURE_LOGGING|VLLM_CPU_KVCACHE_SPACE|VLLM_CPU_OMP_THREADS_BIND"
    r"|VLLM_CPU_NUM_OF_RESERVED_CPU|VLLM_NO_USAGE_STATS|DO_NOT_TRACK|VLLM_CACHE_ROOT|HF_HOME"
    r"|HF_HUB_\w+|HF_ENDPOINT|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HUGGINGFACE_HUB_CACHE|TRANSFORMERS_\w+"
    r"|NO_COLOR|PYTHONUNBUFFERED|PYTHONHASHSEED|PATH|HOME|USER|LOGNAME|SHELL|LANG|LC_\w+|TZ"
    r"|TMPDIR|VLLM_HOST_IP|VLLM_PORT|VLLM_API_KEY|VLLM_RPC_TIMEOUT|VLLM_ENGINE_READY_TIMEOUT_S"
    r"|CUDA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|OMP_NUM_THREADS|LMCACHE_\w+"
    r"|(?i:https?_proxy|no_proxy|all_proxy)|REQUESTS_CA_BUNDLE|SSL_CERT_FILE|SSL_CERT_DIR|CURL_CA_BUNDLE)$"
)

# Environment variables known to change N (the attention backend and its kernels, the engine
# generation): their values are kept in the fingerprint inputs as they are. Every other variable that
# is not ignored enters as a hash of its name and value, never the value (it may be a credential).
ENV_N_ALLOWLIST = frozenset((
    "VLLM_ATTENTION_BACKEND", "VLLM_USE_V1", "VLLM_USE_V2", "VLLM_FLASH_ATTN_VERSION", "VLLM_MLA_DISABLE",
    "VLLM_KV_CACHE_LAYOUT", "VLLM_USE_TRITON_FLASH_ATTN", "VLLM_USE_FLASHINFER_SAMPLER",
    "VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MHA", "VLLM_CPU_SGL_KERNEL", "VLLM_TARGET_DEVICE",
    "VLLM_USE_DEEP_GEMM", "VLLM_USE_FLASHINFER_MOE_FP8", "VLLM_DEFAULT_BLOCK_SIZE",
))
HASHED_PREFIX = "sha256:"

# Python snippet run with the venv's interpreter: versions of the vLLM dists.
VERSION_SNIPPET = (
    "import json, importlib.metadata as m\n"
    "out = {}\n"
    "for d in ('vllm', 'vllm-cpu', 'vllm-rocm', 'vllm-xpu'):\n"
    "    try:\n"
    "        out[d] = m.version(d)\n"
    "    except Exception:\n"
    "        pass\n"
    "print(json.dumps(out))\n"
)


def canonical_json(obj):
    """Deterministic JSON (sorted keys, no whitespace)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def is_local_model(model):
    """A model given as a directory on the host (vs. a hub id)."""
    return bool(model) and os.path.isdir(model)


def read_model_config(model):
    """config.json of a local model dir as (dict, raw bytes), or (None, None)."""
    if not is_local_model(model):
        return None, None
    path = os.path.join(model, "config.json")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except (IOError, OSError):
        return None, None
    try:
        return json.loads(raw.decode("utf-8")), raw
    except ValueError:
        return None, raw


def model_identity(model, revision=None):
    """Identity of the checkpoint: its config.json content for a local dir
    (the architecture and every size vLLM reads come from it), the hub id and
    revision otherwise."""
    if is_local_model(model):
        _cfg, raw = read_model_config(model)
        if raw is None:
            raise ValueError("model directory %s has no readable config.json" % model)
        return {"kind": "local", "config_sha256": sha256_bytes(raw)}
    return {"kind": "hub", "id": model, "revision": revision or "main"}


def resolve_vllm_version(dists):
    """The vLLM version string from a {dist-name: version} mapping.

    vllm-cpu installs a dist named ``vllm-cpu``; vLLM itself reports
    ``<version>+cpu`` for it (and the fleet's CPU fixup adds a ``vllm``
    dist-info shim with that version). Returns None when no vLLM dist exists.
    """
    if not dists:
        return None
    if dists.get("vllm"):
        return str(dists["vllm"])
    for name, suffix in (("vllm-cpu", "cpu"), ("vllm-rocm", "rocm"), ("vllm-xpu", "xpu")):
        ver = dists.get(name)
        if ver:
            ver = str(ver)
            return ver if suffix in ver else "%s+%s" % (ver, suffix)
    return None


def platform_from_version(version):
    """cpu / rocm / xpu / cuda from a vLLM version string."""
    v = (version or "").lower()
    for plat in ("cpu", "rocm", "xpu", "tpu"):
        if plat in v:
            return plat
    return "cuda"


def dist_versions_from_site_packages(site_packages_dirs):
    """Fallback without running Python: read dist-info METADATA files."""
    out = {}
    for sp in site_packages_dirs:
        for meta in glob.glob(os.path.join(sp, "*.dist-info", "METADATA")):
            name = version = None
            try:
                with open(meta, "r") as f:
                    for line in f:
                        if line.startswith("Name:"):
                            name = line.split(":", 1)[1].strip().lower().replace("_", "-")
                        elif line.startswith("Version:"):
                            version = line.split(":", 1)[1].strip()
                        if name and version:
                            break
            except (IOError, OSError):
                continue
            if name in ("vllm", "vllm-cpu", "vllm-rocm", "vllm-xpu") and version:
                out.setdefault(name, version)
    return out


def normalize_speculative_config(value):
    """Speculative config as a dict (or None) from a dict or a JSON string."""
    return normalize_json_option(value, "speculative_config")


def normalize_choice(value):
    """'auto', '' and None all mean vLLM's default."""
    if value is None:
        return "auto"
    value = str(value).strip()
    return value or "auto"


def hashed_value(name, value):
    """``sha256:<hex>`` of a name and its value: a changed value changes the fingerprint, and the value
    itself is never stored."""
    return HASHED_PREFIX + sha256_bytes(("%s\0%s" % (name, value)).encode("utf-8"))


def relevant_env(env):
    """The user-given environment entries that may change N: the allow-listed ones with their
    values, a secret-named one as ``<redacted>`` (a credential does not change N), every other one
    (not known to be irrelevant) as a hash of its value."""
    out = {}
    for key, value in (env or {}).items():
        key, value = str(key), str(value)
        if ENV_IGNORED_RE.match(key):
            continue
        if key in ENV_N_ALLOWLIST:
            out[key] = redact_text(value)
        elif is_secret_name(key):
            out[key] = REDACTED
        else:
            out[key] = hashed_value(key, value)
    return out


def fingerprint_inputs(model_id, vllm_version, extra_args=None, env=None, probe_mode="full", platform=None,
                       hardware=None, **n_inputs):
    """The canonical dict that is hashed (also stored with a cache entry).

    ``n_inputs``: the inputs of N by name (``vllm_cli.N_INPUTS``: tensor_parallel_size, dtype, ...;
    missing ones mean vLLM's default). ``hardware`` is :func:`hardware.hardware_identity` of the
    host (the GPUs the service uses, or the CPU model and ISA flags): N read on other hardware is
    not valid here."""
    return {
        "fingerprint_version": FINGERPRINT_VERSION,
        "model": redact(model_id),
        "vllm_version": vllm_version,
        "platform": platform or platform_from_version(vllm_version),
        **redact(n_input_values(n_inputs_of(n_inputs))),
        # a secret-named flag's value as <redacted> (a credential does not change N), shapes redacted
        "extra_args": redact_args(extra_args),
        "env": relevant_env(env),
        "probe_mode": probe_mode or "full",
        "hardware": hardware,
    }


def compute_fingerprint(inputs):
    """sha256 hex of the canonical JSON of fingerprint_inputs()."""
    return sha256_bytes(canonical_json(inputs).encode("utf-8"))


def service_fingerprint(inputs):
    """Fingerprint of the inputs that change N, without the probe mode.

    The probe mode (``full`` / ``shrunk``) keys the cache; a vLLM service
    started with the same inputs prints the same N whatever the probe mode, so
    this is what a service records next to its unit and what the module
    compares before it takes N from that service's journal.
    """
    data = dict((k, v) for k, v in (inputs or {}).items() if k != "probe_mode")
    data["purpose"] = "service"
    return sha256_bytes(canonical_json(data).encode("utf-8"))
