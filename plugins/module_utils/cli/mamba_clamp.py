# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep --max-num-seqs within vLLM's Mamba cache blocks M (pure logic).

vLLM with full CUDA graphs refuses to start a hybrid model when ``max_num_seqs`` exceeds the
number of KV cache blocks it could allocate (``vllm/config/compilation.py``)::

    ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (604). ...

M is ``kv_cache_config.num_blocks``: ``KV memory // page size // layers per KV cache group``
(``vllm/v1/core/kv_cache_utils.py get_num_blocks``), where the page is the unified hybrid page
(N tokens x the attention bytes per token, the same for the Mamba layers) and the group size is
the number of layers of the rarer layer type (every type padded to it). The KV memory is what the
GPU's memory times ``--gpu-memory-utilization`` leaves after the weights and the profiling peak.

M comes, per host, from the best source there is:

* ``refusal``: vLLM's own error, which names M (:func:`parse_refusal`), cached on the host with the
  inputs that change it (:func:`cache_key`);
* ``group``: the M the probe group's first host reported (:func:`group_blocks`), when the inputs that
  change M are the same;
* ``predicted``: :func:`predict_mamba_blocks` from the model's weight bytes (safetensors index
  ``metadata.total_size``, else the parameter count of the config times the dtype size), the GPU's
  memory (gpu facts, else :data:`GPU_MEMORY_MIB`), the memory utilization and N's page size; it
  keeps :data:`RESERVE_BYTES` plus :data:`WEIGHT_MARGIN` of the weights for the profiling peak, so
  it errs low (vLLM 0.24.0 on an H200, Qwen3.6-27B, benchmarks/results/gpu-clamp-27b-*: at 0.5 measured
  M=368, predicted 263; at 0.6 measured 604 with 1024 sequences, predicted 556; at 0.9 predicted 1436,
  above vLLM's default 1024).

:func:`host_memory` is what the host plan calls (``plan_tree.predict``): the GPU budget (whether the
weights fit at all: :func:`fit_error`) and M for a hybrid model.

:func:`decide_max_num_seqs` then gives the value the unit runs with: vLLM's default (or the user's
value) when it fits, else M with a warning; a user's value is never raised, and one above an M
that vLLM itself reported is an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

GIB = 1 << 30
MIB = 1 << 20

# The probe cache's section of the M vLLM reported in a refusal ({cache_key_of: record}; _probe/cache.py).
MAMBA_SECTION = 'mamba_blocks'
REFUSAL_RE = re.compile(r'max_num_seqs \((?P<seqs>\d+)\) exceeds available Mamba cache blocks \((?P<blocks>\d+)\)')

# vLLM's own default --gpu-memory-utilization.
VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9

# Memory vLLM keeps besides weights and KV cache (activation peak of the profiling run, CUDA graphs,
# non-torch allocations): 5.08 GiB measured for Qwen3.6-27B on an H200 at 0.6 (84.24 GiB usable,
# 50.22 GiB weights, 28.94 GiB KV); the prediction keeps 6 GiB plus 3 % of the weights.
RESERVE_BYTES = 6 * GIB
WEIGHT_MARGIN = 0.03

# Total memory of one GPU as nvidia-smi reports it (memory.total, MiB), for a plan without gpu facts
# (vllm_server_gpu_architecture naming the GPU, e.g. "NVIDIA H200" or "NVIDIA A100-SXM4-40GB"). Each entry is a
# regular expression matched against the lower-case name with "-" and "_" read as spaces; the most specific
# entries come first (GH200 before H200, H100 NVL before H100, A100 80GB before A100, A10G before A10, L40S
# before L40 before L4). An A100 whose name does not say 80GB is read as the 40GB one, a GH200 as the 96 GB
# one: the plan errs low.
GPU_MEMORY_MIB = (
    (r'\bgh200\b', 97871),
    (r'\bh200\b', 143771),
    (r'\bh100\b.*\bnvl\b', 95830),
    (r'\bh100\b', 81559),
    (r'\bh20\b', 97871),
    (r'\bb200\b', 183359),
    (r'\ba100\b.*\b80\s*gb?\b', 81920),
    (r'\ba100\b', 40960),
    (r'\ba10g\b', 23028),
    (r'\ba10\b', 23028),
    (r'\bl40s\b', 46068),
    (r'\bl40\b', 46068),
    (r'\bl4\b', 23034),
    (r'\ba40\b', 46068),
    (r'\brtx\s+6000\s+ada\b', 49140),
    (r'\brtx\s+a6000\b', 49140),
)

DTYPE_BYTES = {'float32': 4, 'float': 4, 'bfloat16': 2, 'float16': 2, 'half': 2}

# The variables that raise M (named in every clamp warning).
RAISE_M = ('vllm_server_gpu_memory_utilization', 'vllm_server_tensor_parallel_size')

# What makes the weights fit a GPU (named in the error of a model that does not fit).
FIT_VARIABLES = ('vllm_server_tensor_parallel_size', 'vllm_server_gpu_memory_utilization',
                 'vllm_server_model (a quantized model)', 'vllm_server_extra_args (--quantization)')

# The least vLLM needs besides the weights (activation peak of the profiling run, CUDA graphs, non-torch
# allocations): below every overhead measured on the H200 (2.33 GiB at 0.5 with 263 sequences, 5.08 GiB at
# 0.6 with 1024: benchmarks/results/gpu-clamp-27b-*). Weights per GPU above the GPU's memory x utilization
# minus this cannot start: the plan refuses such a host.
FIT_RESERVE_BYTES = 1 * GIB

# Fewer sequences at once than this is named in the clamp warning as a small batch.
FEW_SEQS = 64

QUANTIZATION_FLAGS = ('--quantization', '-q')


def parse_refusal(text):
    """``{'max_num_seqs': int, 'mamba_cache_blocks': int}`` from vLLM's refusal (the last one in
    ``text``), or None when the text holds none."""
    found = list(REFUSAL_RE.finditer(str(text or '')))
    if not found:
        return None
    last = found[-1]
    return {'max_num_seqs': int(last.group('seqs')), 'mamba_cache_blocks': int(last.group('blocks'))}


def vllm_default_max_num_seqs(platform, gpu_memory_mib=None, gpu_name=None, world_size=1):
    """vLLM's default max_num_seqs for ``vllm serve`` (``EngineArgs.get_batch_defaults``, 0.24-0.32)."""
    if platform == 'cpu':
        return 128 * max(1, int(world_size or 1))
    memory = (gpu_memory_mib or 0) * MIB
    if memory >= 160 * GIB:
        return 1024
    if memory >= 70 * GIB and 'a100' not in str(gpu_name or '').lower():
        return 1024
    return 256


def gpu_memory_mib(gpus=None, architecture=None):
    """(MiB, source) of one GPU: the smallest of gpu facts' ``memory_total_mib``, else the table by the
    GPU's name (vllm_server_gpu_architecture); (None, why) when neither says."""
    if isinstance(gpus, dict):
        gpus = gpus.get('gpus')
    sizes = [g.get('memory_total_mib') for g in gpus or [] if isinstance(g, dict) and g.get('memory_total_mib')]
    if sizes:
        return int(min(sizes)), 'gpu facts'
    mib = table_memory_mib(architecture)
    if mib is not None:
        return mib, 'GPU table (%s)' % architecture
    return None, 'no gpu facts and vllm_server_gpu_architecture names no GPU of the table'


def table_memory_mib(name):
    """The table's total memory (MiB) of the GPU called ``name`` (the first, most specific match), or None."""
    text = re.sub(r'[-_]', ' ', str(name or '').lower())
    for pattern, mib in GPU_MEMORY_MIB:
        if re.search(pattern, text):
            return mib
    return None


def layer_counts(text_config):
    """(attention layers, Mamba/linear layers) of a hybrid text config."""
    layers = text_config.get('num_hidden_layers')
    types = text_config.get('layer_types')
    if isinstance(types, list) and types:
        attention = sum(1 for t in types if t == 'full_attention')
        return attention, len(types) - attention
    interval = text_config.get('full_attention_interval')
    if not isinstance(layers, int) or not isinstance(interval, int) or interval < 1:
        raise ValueError('config.json has neither layer_types nor num_hidden_layers and full_attention_interval')
    attention = layers // interval
    return attention, layers - attention


def group_size(attention, mamba):
    """Layers per KV cache group (vLLM: the rarer type's count, or the larger one when within 1.5x)."""
    low, high = min(attention, mamba), max(attention, mamba)
    if low < 1:
        return high
    return high if high < low * 1.5 else low


def _text(config):
    text = config.get('text_config')
    return text if isinstance(text, dict) else config


def parameter_count(config, language_model_only=True):
    """Parameters of a Qwen3.5 / Qwen3.6 (Gated-DeltaNet + gated attention) text model from its config;
    the vision tower is not counted (vLLM loads it unless --language-model-only; the reserve covers it)."""
    t = _text(config)
    hidden, vocab, inter = t['hidden_size'], t['vocab_size'], t['intermediate_size']
    heads, kv_heads = t['num_attention_heads'], t['num_key_value_heads']
    head_dim = t.get('head_dim') or hidden // heads
    attention, linear = layer_counts(t)
    gate = 2 if t.get('attn_output_gate', True) else 1
    attn = hidden * heads * head_dim * gate + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden + 2 * head_dim
    k_all = t['linear_num_key_heads'] * t['linear_key_head_dim']
    v_all = t['linear_num_value_heads'] * t['linear_value_head_dim']
    conv_dim = 2 * k_all + v_all
    gdn = (hidden * (2 * k_all + 2 * v_all) + hidden * 2 * t['linear_num_value_heads']
           + conv_dim * t['linear_conv_kernel_dim'] + 2 * t['linear_num_value_heads']
           + t['linear_value_head_dim'] + v_all * hidden)
    mlp = 3 * hidden * inter
    embed = vocab * hidden * (1 if t.get('tie_word_embeddings', config.get('tie_word_embeddings')) else 2)
    layers = attention + linear
    return embed + layers * (mlp + 2 * hidden) + attention * attn + linear * gdn + hidden


def weight_bytes(config, model_dir=None, dtype=None, language_model_only=True):
    """(bytes, source): the safetensors index's ``metadata.total_size`` in ``model_dir`` when there is
    one, else the parameter count times the dtype's size."""
    if model_dir and os.path.isdir(str(model_dir)):
        index = os.path.join(str(model_dir), 'model.safetensors.index.json')
        if os.path.isfile(index):
            with open(index) as handle:
                total = (json.load(handle).get('metadata') or {}).get('total_size')
            if isinstance(total, int) and total > 0:
                return total, 'safetensors index metadata.total_size'
    t = _text(config)
    name = str(dtype if dtype not in (None, '', 'auto') else t.get('dtype') or t.get('torch_dtype') or config.get(
        'torch_dtype') or 'bfloat16').replace('torch.', '').lower()
    if name == 'float32' and dtype in (None, '', 'auto'):
        name = 'bfloat16'  # vLLM's auto downcasts float32 to bfloat16
    size = DTYPE_BYTES.get(name, 2)
    count = parameter_count(config, language_model_only)
    return count * size, 'parameter count %d x %d bytes (%s)' % (count, size, name)


def blocks_for(kv_cache_bytes, page_size, layers_per_group):
    """vLLM's ``get_num_blocks``: KV memory // page size // layers per group (never below 0)."""
    if not page_size or not layers_per_group:
        raise ValueError('page size and layers per group must be positive')
    return max(0, int(kv_cache_bytes) // int(page_size) // int(layers_per_group))


def predict_mamba_blocks(config, prediction, gpu_memory_total_mib, gpu_memory_utilization=None,
                         weights=None, tensor_parallel_size=1, memory_source='given'):
    """Predict M for a hybrid model; returns a dict (``mamba_cache_blocks`` and how it was obtained).

    ``prediction`` is :func:`block_size_predict.explain_block_size`'s result (``block_size`` N and
    ``attn_page_size_per_token`` for one rank); ``weights`` is ``(bytes, source)`` of
    :func:`weight_bytes` for the whole model (divided by the tensor parallel size)."""
    if not isinstance(prediction, dict) or not prediction.get('hybrid'):
        raise ValueError('the model is not a hybrid model: no Mamba cache blocks')
    if not gpu_memory_total_mib:
        raise ValueError('the GPU memory is unknown')
    util = VLLM_DEFAULT_GPU_MEMORY_UTILIZATION if gpu_memory_utilization in (None, '') else float(gpu_memory_utilization)
    tp = max(1, int(tensor_parallel_size or 1))
    weight_total, weight_source = weights if weights else weight_bytes(config)
    per_rank = weight_total // tp
    usable = int(gpu_memory_total_mib * MIB * util)
    reserve = RESERVE_BYTES + int(per_rank * WEIGHT_MARGIN)
    kv = max(0, usable - per_rank - reserve)
    attention, mamba = layer_counts(_text(config))
    group = group_size(attention, mamba)
    per_token = int(prediction['attn_page_size_per_token'])
    n = int(prediction['block_size'])
    return {
        'mamba_cache_blocks': blocks_for(kv, n * per_token, group),
        'source': 'predicted',
        'block_size': n,
        'attn_page_size_per_token': per_token,
        'page_size': n * per_token,
        'layers_per_group': group,
        'kv_cache_bytes': kv,
        'kv_cache_gib': round(kv / float(GIB), 2),
        'gpu_memory_total_mib': int(gpu_memory_total_mib),
        'gpu_memory_source': memory_source,
        'gpu_memory_utilization': util,
        'weight_bytes': per_rank,
        'weight_gib': round(per_rank / float(GIB), 2),
        'weight_source': weight_source,
        'reserve_gib': round(reserve / float(GIB), 2),
        'how': 'GPU %d MiB (%s) x %s - weights %.2f GiB (%s) - reserve %.2f GiB = KV %.2f GiB; '
               '// (N=%d x %d bytes) // %d layers per group'
               % (gpu_memory_total_mib, memory_source, util, per_rank / float(GIB), weight_source,
                  reserve / float(GIB), kv / float(GIB), n, per_token, group),
    }


def quantized(config, extra_args):
    """True when the weights are not the dtype's size: a quantized checkpoint (quantization_config) or a
    --quantization flag among the extra arguments."""
    text = _text(config) if isinstance(config, dict) else {}
    if isinstance(config, dict) and (config.get('quantization_config') or text.get('quantization_config')):
        return True
    return any(str(arg).split('=', maxsplit=1)[0] in QUANTIZATION_FLAGS for arg in extra_args or [])


def host_memory(config, prediction, gpus=None, architecture=None, gpu_memory_utilization=None,
                tensor_parallel_size=1, model_dir=None, dtype=None, extra_args=None):
    """``{'memory': ..., 'mamba': ...}`` of a CUDA host: whether the weights fit one GPU's budget (``memory``:
    ``fits`` True, False or None when unknown, with its numbers) and, for a hybrid model, M predicted from
    that GPU (``mamba``: :func:`predict_mamba_blocks`'s dict, or one whose ``problem`` says why M is unknown).
    Never raises. The GPU's memory is the gpu facts' (deploy read them), else the table's."""
    mib, memory_source = gpu_memory_mib(gpus, architecture)
    hybrid = isinstance(prediction, dict) and prediction.get('hybrid')
    if mib is None:
        return {'memory': {'fits': None, 'problem': memory_source},
                'mamba': {'mamba_cache_blocks': None, 'source': 'predicted', 'problem': memory_source} if hybrid
                else None}
    util = VLLM_DEFAULT_GPU_MEMORY_UTILIZATION if gpu_memory_utilization in (None, '') else float(gpu_memory_utilization)
    tp = max(1, int(tensor_parallel_size or 1))
    memory = {'gpu_memory_total_mib': int(mib), 'gpu_memory_source': memory_source, 'gpu_memory_utilization': util,
              'budget_gib': round(mib * MIB * util / float(GIB), 2), 'tensor_parallel_size': tp}
    try:
        weights = weight_bytes(config, model_dir, dtype)
        if quantized(config, extra_args) and not weights[1].startswith('safetensors'):
            raise ValueError('the weights are quantized and the model has no safetensors index on the control node')
    except (KeyError, TypeError, ValueError, OSError) as exc:
        problem = 'cannot predict the weights\' size: %s%s' % ('no ' if isinstance(exc, KeyError) else '', exc)
        memory.update(fits=None, problem=problem)
        return {'memory': memory, 'mamba': {'mamba_cache_blocks': None, 'source': 'predicted', 'problem': problem}
                if hybrid else None}
    per_rank = weights[0] // tp
    memory.update(weight_gib=round(per_rank / float(GIB), 2), weight_source=weights[1],
                  fits=per_rank + FIT_RESERVE_BYTES <= mib * MIB * util)
    mamba = None
    if hybrid:
        try:
            mamba = predict_mamba_blocks(config, prediction, mib, util, weights, tp, memory_source)
        except (KeyError, TypeError, ValueError) as exc:
            mamba = {'mamba_cache_blocks': None, 'source': 'predicted',
                     'problem': 'cannot predict the Mamba cache blocks: %s' % exc}
    return {'memory': memory, 'mamba': mamba}


def fit_error(host, memory):
    """The error of a host whose weights do not fit its GPU budget (None when they fit or it is unknown)."""
    if not isinstance(memory, dict) or memory.get('fits') is not False:
        return None
    values = (host, memory['weight_gib'], memory['weight_source'], memory['tensor_parallel_size'],
              memory['budget_gib'], memory['gpu_memory_total_mib'], memory['gpu_memory_source'],
              memory['gpu_memory_utilization'], FIT_RESERVE_BYTES // GIB) + FIT_VARIABLES
    return ('host %s: the model does not fit: its weights need %.2f GiB per GPU (%s, tensor parallel size %d) but one '
            'GPU gives %.2f GiB (%d MiB from %s x vllm_server_gpu_memory_utilization %s) and vLLM needs at least '
            '%d GiB more; raise %s or %s, or use %s or %s' % values)


def rescale(mamba, block_size):
    """The predicted M for another N (the probe's): the same KV memory in pages of the new size."""
    if not isinstance(mamba, dict) or mamba.get('source') != 'predicted' or not block_size \
            or mamba.get('mamba_cache_blocks') is None:
        return mamba  # nothing to rescale: another source, or a prediction that names only its problem
    if int(block_size) == int(mamba['block_size']):
        return mamba
    out = dict(mamba, block_size=int(block_size), page_size=int(block_size) * mamba['attn_page_size_per_token'])
    out['mamba_cache_blocks'] = blocks_for(out['kv_cache_bytes'], out['page_size'], out['layers_per_group'])
    return out


def cache_key(fingerprint, gpu_memory_utilization, max_model_len, kv_cache_dtype, mamba_cache_dtype,
              mamba_ssm_cache_dtype):
    """The key a reported M is cached under: the probe's fingerprint plus the inputs that change M."""
    inputs = {'fingerprint': fingerprint, 'gpu_memory_utilization': gpu_memory_utilization,
              'max_model_len': max_model_len, 'kv_cache_dtype': kv_cache_dtype or 'auto',
              'mamba_cache_dtype': mamba_cache_dtype or 'auto', 'mamba_ssm_cache_dtype': mamba_ssm_cache_dtype or 'auto'}
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()[:32]


def cache_key_of(fingerprint, inputs):
    """:func:`cache_key` from the plan's ``derived.mamba_inputs`` (a mapping)."""
    inputs = inputs if isinstance(inputs, dict) else {}
    return cache_key(fingerprint, inputs.get('gpu_memory_utilization'), inputs.get('max_model_len'),
                     inputs.get('kv_cache_dtype'), inputs.get('mamba_cache_dtype'), inputs.get('mamba_ssm_cache_dtype'))


def running_blocks(records, fingerprint, inputs, live_blocks=None):
    """M of a running host for its status: ``{'mamba_cache_blocks', 'source', 'detail'}``. The M vLLM
    reported in a refusal (``records``: the probe cache's M records, ``{key: record}``) when one is cached for
    the unit's recorded fingerprint and the plan's ``mamba_inputs`` (source ``refusal``), else the running
    vLLM's own block count (``num_gpu_blocks`` of its cache metric, source ``metric``), else None."""
    key = cache_key_of(fingerprint, inputs) if fingerprint else None
    blocks = cached_blocks(records, key) if key else None
    if blocks is not None:
        refused = records[key].get('refused_max_num_seqs')
        return {'mamba_cache_blocks': blocks, 'source': 'refusal', 'refused_max_num_seqs': refused,
                'detail': 'vLLM refused max_num_seqs %s with M=%d for the running unit\'s inputs (cached in the '
                          'probe cache)' % (refused if refused is not None else '?', blocks)}
    if isinstance(live_blocks, int) and not isinstance(live_blocks, bool):
        stale = ' (a cached refusal is for other inputs)' if records else ''
        return {'mamba_cache_blocks': live_blocks, 'source': 'metric',
                'detail': "num_gpu_blocks of the running vLLM's cache metric%s" % stale}
    return None


def cached_blocks(records, key):
    """M of the record under ``key`` in ``records`` (the probe cache's M records ``{key: {'mamba_cache_blocks',
    ...}}``), else None."""
    record = records.get(key) if isinstance(records, dict) else None
    value = record.get('mamba_cache_blocks') if isinstance(record, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def group_blocks(own, probe, canary_blocks, canary_inputs, own_inputs, group):
    """The M a host of a probe group plans with: the canary's reported M (with ``group`` and ``canary``) when the
    host took the group's N (``probe['source'] == 'group'``), the canary reported M and the inputs that change M
    (``derived.mamba_inputs``) are the canary's; otherwise ``own`` (a host's own M always wins)."""
    if isinstance(own, dict) and own.get('mamba_cache_blocks') is not None and 'group' not in own:
        return own
    if not isinstance(probe, dict) or probe.get('source') != 'group' or not isinstance(group, dict):
        return own
    if not isinstance(canary_blocks, dict) or canary_blocks.get('mamba_cache_blocks') is None:
        return own
    if canary_inputs is None or canary_inputs != own_inputs:
        return own
    return dict(canary_blocks, group=group.get('name'), canary=group.get('canary'))


def _raise_m_fix(blocks):
    return 'raise M with %s, or set vllm_server_max_num_seqs to at most %d' % (' or '.join(RAISE_M), blocks)


def decide_max_num_seqs(host, explicit, mamba, default, full_cudagraphs=True):
    """``{'value', 'clamped', 'errors', 'warnings', 'mamba_cache_blocks', 'source'}``: the --max-num-seqs
    the unit runs with (None: vLLM's default), given the user's value (``explicit``, None when unset),
    M (``mamba``: a dict with ``mamba_cache_blocks`` and ``source`` - predicted, refusal or cached - or
    None) and vLLM's default for the host. vLLM checks M only with full CUDA graphs (not
    --enforce-eager), so a predicted M is applied only then; an M that vLLM itself reported (refusal,
    cached) is applied whatever the mode: that vLLM refused."""
    out = {'value': explicit, 'clamped': False, 'errors': [], 'warnings': [], 'mamba_cache_blocks': None,
           'source': None}
    if not isinstance(mamba, dict) or mamba.get('mamba_cache_blocks') is None:
        return out
    blocks, source = int(mamba['mamba_cache_blocks']), mamba.get('source') or 'predicted'
    if source == 'predicted' and not full_cudagraphs:
        return out
    out.update(mamba_cache_blocks=blocks, source=source)
    known = source != 'predicted'
    if blocks < 1:
        (out['errors'] if known else out['warnings']).append(
            'host %s: no Mamba cache block fits (%s M=0): the weights leave no KV cache memory; raise %s'
            % (host, source, ' or '.join(RAISE_M)))
        return out
    if explicit is not None:
        if explicit > blocks:
            problem = 'host %s: vllm_server_max_num_seqs=%d exceeds the %s Mamba cache blocks M=%d; %s' % (
                host, explicit, source, blocks, _raise_m_fix(blocks))
            if known:
                out['errors'].append(problem)
            else:
                out['warnings'].append(problem + ' (the prediction errs low; vLLM refuses above its own M, and '
                                       'the deploy then restarts the service once with M)')
        return out
    if default is not None and default > blocks:
        out.update(value=blocks, clamped=True)
        few = (' - fewer than %d sequences at once' % FEW_SEQS) if blocks < FEW_SEQS else ''
        out['warnings'].append('host %s: --max-num-seqs lowered from vLLM\'s default %d to the %s Mamba cache blocks '
                               'M=%d (vLLM refuses more)%s; %s' % (host, default, source, blocks, few,
                                                                   _raise_m_fix(blocks)))
    return out
