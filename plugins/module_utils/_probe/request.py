# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's request: what the module was asked, on what host, for what model, and its fingerprints.

:func:`build_request` checks the parameters, finds vLLM's executable, version and platform, the
identity and environment of the service's user, the model, the hardware (through host.Host), decides
the shrink and computes the fingerprints. It reads the venv's dist-info, ``config.json``,
``/proc/cpuinfo`` and ``nvidia-smi``; it writes nothing. Every refusal is a ProbeFailed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import subprocess

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import (
    FINGERPRINT_VERSION,
    VERSION_SNIPPET,
    compute_fingerprint,
    dist_versions_from_site_packages,
    fingerprint_inputs,
    is_local_model,
    model_identity,
    normalize_speculative_config,
    platform_from_version,
    read_model_config,
    resolve_vllm_version,
    service_fingerprint,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import (
    GpuQueryError,
    gpu_inventory,
    hardware_identity,
    read_cpuinfo,
    visible_gpus,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.managed_flags import SHRINK_BLOCKING_DESTS
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.probe_trust import trusted_uids
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.vllm_cli import N_INPUT_NAMES
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import ProbeCache
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.errors import ProbeFailed
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.host import Host, executable, venv_python
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.launch import filter_extra_args, flag_name, reaches_dest

SHRINK_LAYERS = 4
# vocabulary and dense MLP width of the shrunken model (neither enters N)
SHRINK_VOCAB = 4096
SHRINK_INTERMEDIATE = 512
# config keys of mixture-of-experts MLPs (their widths are left alone)
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")
HYBRID_LINEAR = "linear_attention"
HYBRID_FULL = "full_attention"


# --------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------

def validate_params(p):
    """Plain-sentence problems of the module arguments (pure)."""
    errors = []
    for name, low, what in (("tensor_parallel_size", 1, "must be >= 1"), ("timeout", 1, "must be >= 1 second"),
                            ("block_size", 1, "must be >= 1 (or unset)"), ("cache_keep", 1, "must be >= 1")):
        if p.get(name) is not None and p[name] < low:
            errors.append("%s=%s %s" % (name, p[name], what))
    if p.get("service_fingerprint_file") and not p.get("service_name"):
        errors.append("service_fingerprint_file is set but service_name is not; set service_name "
                      "to the unit whose journal may answer")
    for name in ("release_timeout", "lock_timeout"):
        if p.get(name) is not None and p[name] < 0:
            errors.append("%s=%s must be >= 0 seconds" % (name, p[name]))
    for name in ("gpu_memory_utilization", "min_gpu_memory_utilization"):
        if p.get(name) is not None and not 0 < p[name] <= 1:
            errors.append("%s=%s must be in (0, 1]" % (name, p[name]))
    if p.get("readback") and not p.get("service_name"):
        errors.append("readback is set but service_name is not; set service_name to the started unit")
    if p.get("group") and not p.get("user"):
        errors.append("group is set but user is not; set user to the service's user")
    try:
        normalize_speculative_config(p.get("speculative_config"))
    except ValueError as e:
        errors.append(str(e))
    return errors


# --------------------------------------------------------------------------
# executable, version, platform
# --------------------------------------------------------------------------

def read_vllm_version(vllm_executable):
    """(version or None, how) without importing vLLM (which takes ~17 s)."""
    python = venv_python(vllm_executable)
    if python:
        try:
            out = subprocess.check_output([python, "-I", "-c", VERSION_SNIPPET],
                                          stderr=subprocess.DEVNULL, timeout=60)
            ver = resolve_vllm_version(json.loads(out.decode("utf-8").strip().splitlines()[-1]))
            if ver:
                return ver, "importlib.metadata via %s" % python
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            pass
    venv = os.path.dirname(os.path.dirname(os.path.abspath(vllm_executable)))
    sps = glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))
    ver = resolve_vllm_version(dist_versions_from_site_packages(sps))
    return ver, "dist-info in %s" % venv


# --------------------------------------------------------------------------
# identity and environment
# --------------------------------------------------------------------------

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
# hardware
# --------------------------------------------------------------------------

def host_hardware(host, platform, env):
    """(hardware identity, the visible GPU dicts or None); ProbeFailed on a CUDA host whose GPUs
    cannot be told."""
    if platform != "cuda":
        return hardware_identity(platform, cpu=read_cpuinfo()), None
    try:
        gpus = gpu_inventory(host.run_gpu_query, nvidia_smi=host.nvidia_smi)
    except GpuQueryError as e:
        raise ProbeFailed("cannot tell this CUDA host's GPUs for the fingerprint: %s (set nvidia_smi "
                          "to its path if it is not on PATH)" % e)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    visible = visible_gpus(gpus, cvd)
    if not visible:
        raise ProbeFailed("CUDA_VISIBLE_DEVICES=%r names none of this host's GPUs (%s)" % (
            cvd, ", ".join("%d %s %s" % (g["index"], g["name"], g["uuid"]) for g in gpus) or "none found"))
    return hardware_identity("cuda", visible), visible


# --------------------------------------------------------------------------
# the shrink
# --------------------------------------------------------------------------

def text_config_path(config):
    """('text_config', sub-dict) for multimodal configs, ('', config) else."""
    if isinstance(config.get("text_config"), dict):
        return "text_config", config["text_config"]
    return "", config


def _shrunk_layers(text):
    """(overrides of the layer layout, None) or (None, why the layout cannot be shrunk)."""
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
        return overrides, None
    interval = text.get("full_attention_interval")
    if not isinstance(interval, int) or not 2 <= interval <= SHRINK_LAYERS:
        return None, "no layer_types and no full_attention_interval <= %d" % SHRINK_LAYERS
    per_layer = ("layers_block_type", "hybrid_override_pattern", "attn_layer_indices")
    if any(k in text for k in per_layer) or text.get("mlp_only_layers") \
            or text.get("decoder_sparse_step", 1) not in (None, 1):
        return None, "config defines its layer layout in a way the shrink does not handle"
    return overrides, None


def _shrunk_widths(text, tensor_parallel_size, skip_tokenizer_init):
    """(overrides of the vocabulary and the dense MLP width, the cuts in words)."""
    overrides, cuts = {}, []
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
    return overrides, cuts


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
        if reaches_dest(str(arg), SHRINK_BLOCKING_DESTS):
            return None, "extra_args set %s" % flag_name(str(arg))
    if speculative_config:
        return None, "speculative decoding configured (draft layers follow the target's layout)"
    key, text = text_config_path(config)
    overrides, why = _shrunk_layers(text)
    if overrides is None:
        return None, why
    cuts = ["%d layers" % SHRINK_LAYERS]
    if "quantization_config" not in config and "quantization_config" not in text:
        widths, more = _shrunk_widths(text, tensor_parallel_size, skip_tokenizer_init)
        overrides.update(widths)
        cuts.extend(more)
    where = (" %s" % key) if key else ""
    if key:
        overrides = {key: overrides}
    return overrides, "shrunk%s to %s" % (where, ", ".join(cuts))


# --------------------------------------------------------------------------
# the request
# --------------------------------------------------------------------------

def skipped(base, reason):
    """The answer of a run that launches nothing in check mode."""
    return dict(base, outcome="skipped", skipped=True, reason=reason)


class Request(object):
    """What one run of the module asks and knows. ``base`` is the result so far: every answer and
    the failure path start from it. ``early`` is an answer found while building (check mode without
    vLLM, compute_only)."""

    def __init__(self, module, base):
        self.module = module
        self.p = dict(module.params)
        self.base = base
        self.check_mode = module.check_mode
        self.host = Host(module, self.p["nvidia_smi"])
        self.early = None
        self.journal_note = None
        self.identity = None
        self.gpus = None
        self.hf_overrides = None

    def check_params(self):
        p = self.p
        errors = validate_params(p)
        if errors:
            raise ProbeFailed("; ".join(errors))
        if p["expected"]:
            # a confirmation reads what the running service printed: force does not apply, nothing is launched
            p["force"] = False
        self.spec = normalize_speculative_config(p["speculative_config"])
        self.extra_args, dropped = filter_extra_args(p["extra_args"])
        if dropped:
            self.base["dropped_extra_args"] = dropped
            self.module.warn("block_size_probe ignores %s from extra_args: the probe sets these itself"
                             % " ".join(dropped))

    def find_vllm(self):
        """vLLM's executable, version and platform; False when check mode finds no vLLM (``early``)."""
        self.vllm = executable(self.p["vllm_executable"])
        if not self.vllm:
            if self.check_mode:
                self.early = skipped(self.base, "vLLM executable %s not found; in check mode nothing is "
                                     "probed" % self.p["vllm_executable"])
                return False
            raise ProbeFailed("vLLM executable %s not found or not executable" % self.p["vllm_executable"])
        self.python = venv_python(self.vllm)
        self.version = read_vllm_version(self.vllm)[0]
        if not self.version:
            raise ProbeFailed("cannot tell the vLLM version of %s (no vllm / vllm-cpu dist metadata found)"
                              % self.vllm)
        self.platform = platform_from_version(self.version)
        return True

    def find_identity(self):
        """The service user's identity (the probe runs as it) and the cache's trusted owners."""
        if self.p["user"]:
            try:
                self.identity = user_identity(self.p["user"], self.p["group"])
            except KeyError as e:
                raise ProbeFailed("cannot run the probe as the service's user: %s" % e.args[0])
            if os.geteuid() != 0 and self.identity["uid"] != os.geteuid():
                raise ProbeFailed("the probe must run vLLM as user %s but the module runs as uid %d without "
                                  "root; run the task with become: true" % (self.identity["name"], os.geteuid()))
            self.base["user"] = self.identity["name"]
        uids = trusted_uids(self.identity["uid"] if self.identity else None)
        self.cache = ProbeCache(self.p["cache_path"], uids, keep=self.p["cache_keep"], mover=self.module.atomic_move,
                                warn=self.module.warn, fingerprint_version=FINGERPRINT_VERSION,
                                compute=compute_fingerprint)

    def find_model(self):
        """The model's identity and config, and the probe's environment."""
        local = is_local_model(self.p["model"])
        try:
            self.model_id = model_identity(self.p["model"], self.p["revision"])
        except ValueError as e:
            raise ProbeFailed(str(e))
        self.config = read_model_config(self.p["model"])[0] if local else None
        parent_env = service_base_env(self.identity) if self.identity else os.environ
        self.env = probe_env(parent_env, self.p["env"], platform=self.platform, local_model=local)

    def find_hardware(self):
        try:
            self.hardware, self.gpus = host_hardware(self.host, self.platform, self.env)
        except ProbeFailed as e:
            e.result.update(vllm_version=self.version, platform=self.platform)
            raise
        self.base["hardware"] = self.hardware

    def decide_shrink(self):
        p = self.p
        self.skip_tokenizer_init = p["language_model_only"] if p["skip_tokenizer_init"] is None \
            else p["skip_tokenizer_init"]
        if p["shrink"] == "never":
            self.probe_mode, self.shrink_reason = "full", "shrink=never"
            return
        self.hf_overrides, self.shrink_reason = shrink_overrides(
            self.config, self.extra_args, self.spec, tensor_parallel_size=p["tensor_parallel_size"],
            skip_tokenizer_init=self.skip_tokenizer_init)
        self.probe_mode = "shrunk" if self.hf_overrides else "full"

    def compute_fingerprints(self):
        # the inputs of N, one option each (vllm_cli.N_INPUTS), the speculative config parsed
        self.n_values = dict((name, self.p[name]) for name in N_INPUT_NAMES)
        self.n_values["speculative_config"] = self.spec
        self.use_mode(self.probe_mode, self.shrink_reason)
        self.base.update(vllm_version=self.version, platform=self.platform,
                         service_fingerprint=service_fingerprint(self.inputs))
        if self.p["compute_only"]:
            self.early = dict(self.base, outcome="computed",
                              reason="compute_only=true: fingerprints computed, nothing read or launched")

    def use_mode(self, probe_mode, shrink_reason):
        """Probe the shrunken or the full model: its fingerprint, in ``base`` too."""
        self.probe_mode, self.shrink_reason = probe_mode, shrink_reason
        self.inputs = fingerprint_inputs(
            self.model_id, self.version, extra_args=self.extra_args, env=self.p["env"], probe_mode=probe_mode,
            platform=self.platform, hardware=self.hardware, **self.n_values)
        self.fingerprint = compute_fingerprint(self.inputs)
        self.base.update(fingerprint=self.fingerprint, inputs=self.inputs, probe_mode=probe_mode,
                         shrink_reason=shrink_reason)


def build_request(module, base):
    """The Request of this run, built step by step (``base`` filled in on the way)."""
    req = Request(module, base)
    req.check_params()
    if req.find_vllm():
        req.find_identity()
        req.find_model()
        req.find_hardware()
        req.decide_shrink()
        req.compute_fingerprints()
    return req
