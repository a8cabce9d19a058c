# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's command lines: ``vllm serve`` with the inputs of N from vllm_cli and the cheap flags, and
the engine launcher's argv (engine_launcher.py) built from it. Builds argv; starts nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import inspect
import json

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.managed_flags import reached
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.vllm_cli import (
    n_input_argv,
    n_inputs_of,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.vllm_cli_table import TABLE as VLLM_TABLE
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import engine_launcher

# Settings (vLLM's option destinations) that the probe sets itself; extra_args that reach them by any
# spelling vLLM accepts are dropped (they would point the probe at production resources or break
# the cheap path).
PROBE_OWNED_DESTS = frozenset(("host", "port", "uds", "kv_transfer_config", "load_format", "api_key",
                               "served_model_name", "ssl_keyfile", "ssl_certfile"))

DEFAULT_MAX_NUM_BATCHED_TOKENS = 16384
DEFAULT_MAX_MODEL_LEN = 4096
DEFAULT_GPU_MEMORY_UTILIZATION = 0.3


def flag_name(arg):
    return arg.split("=", 1)[0]


def reaches_dest(arg, dests):
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
        if reaches_dest(arg, PROBE_OWNED_DESTS):
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
    return [python, "-c", inspect.getsource(engine_launcher), serve_argv[2]] + rest


def shown_argv(argv):
    """argv for results and logs: the engine launcher's source replaced by a placeholder."""
    if len(argv) > 2 and argv[1] == "-c":
        return [argv[0], "-c", "<block_size_probe engine launcher>"] + list(argv[3:])
    return list(argv)
