# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Predict vLLM's unified block size N from a model's config.json (pure arithmetic).

This mirrors ``Platform._align_hybrid_block_size`` (vLLM >= 0.20) and
``HybridAttentionMambaModelConfig`` (vLLM <= 0.19) for the Gated-DeltaNet hybrid
families below.  The probe (real vLLM) stays the source of truth; the prediction is
for planning, cross-checks and tests.

Known hybrid architectures (GDN + full attention):
``Qwen3_5ForConditionalGeneration``, ``Qwen3_5MoeForConditionalGeneration``,
``Qwen3_5ForCausalLM``, ``Qwen3_5MoeForCausalLM``, ``Qwen3NextForCausalLM``.

Known dense (attention-only) architectures (:data:`DENSE_ARCHITECTURES`) are not
hybrid: vLLM keeps its ordinary block size, so the prediction is that block size
(the user's ``block_size``, else the platform default 16 on CUDA, 128 on CPU) and
:func:`explain_block_size` reports ``hybrid: False``.

Any other architecture raises ``ValueError``: the family is unknown and N is never guessed.

Algorithm (all sizes in bytes, ``tp`` = tensor parallel size):

* attention page per token ``attn1 = 2 * max(1, kv_heads // tp) * head_dim * sizeof(kv dtype)``
  (nvfp4: ``head_dim // 2 + head_dim // 16`` bytes per head; ``*_per_token_head`` adds ``2 * kv * 4``).
* GDN state ``conv_dim = k_dim * k_heads * 2 + v_dim * v_heads``;
  conv ``(conv_kernel - 1 + num_speculative_tokens) * conv_dim / tp`` in the conv dtype
  (``mamba_cache_dtype``, auto = model dtype); SSM ``v_heads / tp * v_dim * k_dim`` in the SSM dtype
  (``mamba_ssm_cache_dtype``, auto = the config's ``mamba_ssm_dtype`` for Qwen3.5/3.6 architectures
  (text-only ``...ForCausalLM`` ones only from vLLM 0.20), else the conv dtype).
* alignment: CUDA kernel minimum 16, default block 16; CPU kernel ``MultipleOf(32)``, default block 128.
  The kernel minimum comes from the attention backend the hardware selects, so the prediction takes
  the hardware ``architecture`` (``cpu``, ``smXY``, a family such as ``hopper``, a compute capability
  such as ``9.0`` or a GPU name such as ``NVIDIA H200``); see :data:`CUDA_BACKENDS`.  Without it the
  platform's default is assumed (:data:`DEFAULT_ARCHITECTURES`: ``sm90`` for cuda, ``cpu`` for cpu) and
  the result's ``assumed_architecture`` / ``architecture_source`` say so.
  vLLM >= 0.20: ``align = max(kernel minimum, block)``, a user block size rounded up to the kernel
  minimum.  vLLM <= 0.19: ``align = 16``.
* ``N = align * cdiv(mamba_page, align * attn1)``; when the block size already is >= that, it is kept.
"""

from __future__ import annotations

import json
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import (
    LEGACY_ALIGNMENT,
    PLATFORMS,
    architecture_from_gpu_name,
    normalize_architecture,
)

HYBRID_GDN_ARCHITECTURES = (
    'Qwen3_5ForConditionalGeneration',
    'Qwen3_5MoeForConditionalGeneration',
    'Qwen3_5ForCausalLM',
    'Qwen3_5MoeForCausalLM',
    'Qwen3NextForCausalLM',
)
# architectures that copy text_config.mamba_ssm_dtype into the SSM cache dtype when it is auto
SSM_DTYPE_FROM_CONFIG_ALWAYS = ('Qwen3_5ForConditionalGeneration', 'Qwen3_5MoeForConditionalGeneration')
SSM_DTYPE_FROM_CONFIG_SINCE_0_20 = ('Qwen3_5ForCausalLM', 'Qwen3_5MoeForCausalLM')

DENSE_ARCHITECTURES = (
    'Qwen3ForCausalLM',
    'Qwen3MoeForCausalLM',
    'Qwen2ForCausalLM',
    'LlamaForCausalLM',
    'MistralForCausalLM',
)

# The hardware assumed when the caller names none: the GPU kind the fleet is built for (NVIDIA
# Hopper, e.g. H100 / H200) on cuda, the CPU backend on cpu.
DEFAULT_ARCHITECTURES = {'cuda': 'sm90', 'cpu': 'cpu'}

# vLLM >= 0.20 on CUDA: the attention backend vLLM selects by default per GPU generation (lowest
# compute capability first) and the smallest kernel block size it supports. Every default CUDA
# backend of current vLLM has a minimum of 16 (FLASH_ATTN [16, 32, 64] with a float32 Mamba state,
# else MultipleOf(16); FLASHINFER [16, 32, 64]; TRITON_ATTN MultipleOf(16)), so N is the same on
# every NVIDIA GPU today; the table keeps the backend in the explanation and the place to change
# when a generation gets another one.
CUDA_BACKENDS = (
    # (first sm number, backend, kernel block minimum)
    (70, 'TRITON_ATTN', 16),
    (80, 'FLASH_ATTN', 16),
    (100, 'FLASHINFER', 16),
)
CPU_BACKEND = ('CPU_ATTN', 32)
DEFAULT_VLLM_VERSION = '0.32.0'

DTYPE_SIZES = {
    'float32': 4, 'float': 4, 'fp32': 4,
    'bfloat16': 2, 'bf16': 2,
    'float16': 2, 'half': 2, 'fp16': 2,
}
FP8_KV_DTYPES = ('fp8', 'fp8_e4m3', 'fp8_e5m2', 'fp8_inc', 'fp8_ds_mla')
PER_TOKEN_HEAD_KV_DTYPES = ('int8_per_token_head', 'fp8_per_token_head')


def _cdiv(num, den):
    return -(-num // den)


def _version_tuple(version):
    if version in (None, ''):
        version = DEFAULT_VLLM_VERSION
    numbers = re.findall(r'\d+', str(version))[:3]
    if not numbers:
        raise ValueError('vllm_version %r is not a version number' % (version,))
    return tuple(int(part) for part in numbers) + (0,) * (3 - len(numbers))


def _architecture(config):
    archs = config.get('architectures') or []
    if isinstance(archs, str):
        archs = [archs]
    if not archs:
        raise ValueError('config.json has no architectures entry; the model family is unknown, run the block-size probe')
    return archs[0]


def _text_config(config):
    text = config.get('text_config')
    return text if isinstance(text, dict) else config


def _field(text, name):
    value = text.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError('config.json field %s is missing or not an integer (got %r)' % (name, value))
    return value


def _dtype_size(name, what):
    key = str(name).replace('torch.', '').lower()
    if key not in DTYPE_SIZES:
        raise ValueError('%s %r is not a dtype the predictor knows (use bfloat16, float16 or float32)' % (what, name))
    return DTYPE_SIZES[key]


def _model_dtype(config, text, dtype):
    """Resolve --dtype: auto = the config's dtype with float32 downcast to bfloat16."""
    if dtype not in (None, '', 'auto'):
        key = str(dtype).lower()
        _dtype_size(key, 'dtype')
        return {'float': 'float32', 'fp32': 'float32', 'half': 'float16', 'fp16': 'float16', 'bf16': 'bfloat16'}.get(key, key)
    declared = (config.get('dtype') or config.get('torch_dtype') or text.get('dtype') or text.get('torch_dtype') or 'float32')
    declared = str(declared).replace('torch.', '').lower()
    _dtype_size(declared, 'config dtype')
    if declared in ('float32', 'float', 'fp32'):
        return 'bfloat16'
    return {'half': 'float16', 'fp16': 'float16', 'bf16': 'bfloat16'}.get(declared, declared)


def _attn_page_per_token(kv_heads_per_rank, head_dim, kv_cache_dtype, model_dtype):
    kv = kv_cache_dtype if kv_cache_dtype not in (None, '') else 'auto'
    kv = str(kv).lower()
    if kv == 'auto':
        return 2 * kv_heads_per_rank * head_dim * _dtype_size(model_dtype, 'dtype')
    if kv in FP8_KV_DTYPES:
        return 2 * kv_heads_per_rank * head_dim
    if kv == 'nvfp4':
        return 2 * kv_heads_per_rank * (head_dim // 2 + head_dim // 16)
    if kv in PER_TOKEN_HEAD_KV_DTYPES:
        return 2 * kv_heads_per_rank * head_dim + 2 * kv_heads_per_rank * 4
    if kv in DTYPE_SIZES:
        return 2 * kv_heads_per_rank * head_dim * DTYPE_SIZES[kv]
    raise ValueError('kv_cache_dtype %r is not known to the predictor' % (kv_cache_dtype,))


def _divide(num, den, what):
    if num % den:
        raise ValueError('%s (%d) is not divisible by tensor_parallel_size %d' % (what, num, den))
    return num // den


def _num_speculative_tokens(num_speculative_tokens, speculative_config):
    if num_speculative_tokens in (None, '') and isinstance(speculative_config, dict):
        num_speculative_tokens = speculative_config.get('num_speculative_tokens')
    if num_speculative_tokens in (None, ''):
        return 0
    if isinstance(num_speculative_tokens, bool) or int(num_speculative_tokens) < 0:
        raise ValueError('num_speculative_tokens must be an integer >= 0')
    return int(num_speculative_tokens)


def _one_architecture(value):
    if isinstance(value, dict):  # a GPU of hardware.gpu_inventory()
        if value.get('compute_cap'):
            return normalize_architecture(str(value['compute_cap']))
        value = value.get('name')
        found = architecture_from_gpu_name(value)
        if found is None:
            raise ValueError('GPU %r has no compute_cap and a name the predictor does not know' % (value,))
        return found
    try:
        return normalize_architecture(value)
    except ValueError:
        found = architecture_from_gpu_name(value)
        if found is None:
            raise
        return found


def _hardware_architecture(architecture):
    """smXY / cpu / None from a string, a GPU dict or a list of them (all of one architecture)."""
    if architecture in (None, '', []):
        return None
    if isinstance(architecture, (list, tuple)):
        found = sorted(set(_one_architecture(item) for item in architecture))
        if len(found) > 1:
            raise ValueError('the GPUs are of different architectures (%s); vLLM needs one kind per service'
                             % ', '.join(found))
        return found[0]
    return _one_architecture(architecture)


def resolve_architecture(platform=None, architecture=None):
    """(platform, architecture, source, backend, kernel minimum) for the prediction.

    ``architecture`` may be ``cpu``, ``smXY``, a family name, a compute capability, a GPU name, a
    GPU dict of ``hardware.gpu_inventory()`` or a list of them (one architecture);
    the platform follows from it when ``platform`` is not given.  Without an architecture the
    platform's default (:data:`DEFAULT_ARCHITECTURES`) is assumed, and without either, cuda.
    Raises ValueError for an unknown value or a platform that contradicts the architecture."""
    plat = None if platform in (None, '') else str(platform).lower()
    if plat is not None and plat not in PLATFORMS:
        raise ValueError('platform %r is not supported (use cuda or cpu)' % (platform,))
    arch = _hardware_architecture(architecture)
    if arch is None:
        plat = plat or 'cuda'
        arch, source = DEFAULT_ARCHITECTURES[plat], 'default for platform %s' % plat
    else:
        source = 'given'
        arch_platform = 'cpu' if arch == 'cpu' else 'cuda'
        if plat is not None and plat != arch_platform:
            raise ValueError('architecture %r is a %s architecture but platform is %s'
                             % (architecture, arch_platform, plat))
        plat = arch_platform
    if plat == 'cpu':
        backend, kernel_min = CPU_BACKEND
    else:
        sm = int(arch[2:])
        if sm < CUDA_BACKENDS[0][0]:
            raise ValueError('architecture %s (compute capability below 7.0) is not supported by vLLM' % arch)
        backend, kernel_min = [(b, k) for first, b, k in CUDA_BACKENDS if sm >= first][-1]
    return plat, arch, source, backend, kernel_min


def _attn_page_of(text, tp, kv_cache_dtype, model_dtype):
    """Bytes of one token's attention page on one rank."""
    kv_heads = _field(text, 'num_key_value_heads')
    head_dim = text.get('head_dim')
    if head_dim is None:
        head_dim = _field(text, 'hidden_size') // _field(text, 'num_attention_heads')
    return _attn_page_per_token(max(1, kv_heads // tp), int(head_dim), kv_cache_dtype, model_dtype)


def _state_dtypes(arch, text, modern, model_dtype, mamba_cache_dtype, mamba_ssm_cache_dtype):
    """(conv state dtype, SSM state dtype) of the GDN layers."""
    conv_dtype = model_dtype if mamba_cache_dtype in (None, '', 'auto') else str(mamba_cache_dtype).lower()
    if mamba_ssm_cache_dtype not in (None, '', 'auto'):
        ssm_dtype = str(mamba_ssm_cache_dtype).lower()
    elif text.get('mamba_ssm_dtype') and (arch in SSM_DTYPE_FROM_CONFIG_ALWAYS or (modern and arch in SSM_DTYPE_FROM_CONFIG_SINCE_0_20)):
        ssm_dtype = str(text['mamba_ssm_dtype']).replace('torch.', '').lower()
    else:
        ssm_dtype = conv_dtype
    return conv_dtype, ssm_dtype


def _mamba_page(text, tp, spec, conv_dtype, ssm_dtype):
    """Bytes of one GDN layer's state page on one rank (conv state plus SSM state)."""
    k_dim = _field(text, 'linear_key_head_dim')
    k_heads = _field(text, 'linear_num_key_heads')
    v_dim = _field(text, 'linear_value_head_dim')
    v_heads = _field(text, 'linear_num_value_heads')
    conv_kernel = _field(text, 'linear_conv_kernel_dim')
    conv_dim = k_dim * k_heads * 2 + v_dim * v_heads
    conv_bytes = (conv_kernel - 1 + spec) * _divide(conv_dim, tp, 'GDN conv dim') * _dtype_size(conv_dtype, 'mamba_cache_dtype')
    ssm_bytes = _divide(v_heads, tp, 'linear_num_value_heads') * v_dim * k_dim * _dtype_size(ssm_dtype, 'mamba_ssm_cache_dtype')
    return conv_bytes + ssm_bytes


def _num_layers(text):
    """The decoder layers of a text config (``layer_types`` when given, else ``num_hidden_layers``), or None."""
    types = text.get('layer_types')
    if isinstance(types, list) and types:
        return len(types)
    layers = text.get('num_hidden_layers')
    return layers if isinstance(layers, int) and layers > 0 else None


def _dense_pages(config, tp, dtype, kv_cache_dtype):
    """A dense model's attention page per token (one rank) and layer count, what LMCache stores per token; empty
    when the config lacks a field (N does not need them)."""
    try:
        text = _text_config(config)
        per_token = _attn_page_of(text, tp, kv_cache_dtype, _model_dtype(config, text, dtype))
    except (ValueError, KeyError, TypeError):
        return {}
    layers = _num_layers(text)
    return {'attn_page_size_per_token': per_token, 'num_layers': layers} if layers else {}


def _common_result(config, tensor_parallel_size, block_size, platform, vllm_version, architecture):
    """(the parsed config, the result's entries every family has, the block size asked for or None, the
    attention backend's kernel block size)."""
    if isinstance(config, (str, bytes)):
        config = json.loads(config)
    if not isinstance(config, dict):
        raise ValueError('config must be a parsed config.json mapping')
    platform, hw_arch, hw_source, backend, kernel_min = resolve_architecture(platform, architecture)
    version = _version_tuple(vllm_version)
    modern = version >= (0, 20, 0)
    arch = _architecture(config)
    tp = 1 if tensor_parallel_size in (None, '') else int(tensor_parallel_size)
    if tp < 1:
        raise ValueError('tensor_parallel_size must be >= 1')
    user_block = None if block_size in (None, '') else int(block_size)
    if user_block is not None and user_block < 1:
        raise ValueError('block_size must be >= 1')

    result = {
        'architecture': arch,
        'platform': platform,
        'vllm_version': '.'.join(str(part) for part in version),
        'tensor_parallel_size': tp,
        'assumed_architecture': hw_arch,
        'architecture_source': hw_source,
        'attention_backend': backend,
        'kernel_block_size': kernel_min if modern else LEGACY_ALIGNMENT,
    }
    return config, result, user_block, kernel_min


def _block_and_alignment(modern, user_block, default_block, kernel_min):
    """(the block size before the hybrid rule, the alignment of the attention block)."""
    if modern:
        block = default_block if user_block is None else _cdiv(user_block, kernel_min) * kernel_min
        return block, max(kernel_min, block)
    return (default_block if user_block is None else user_block), LEGACY_ALIGNMENT


def explain_block_size(config, tensor_parallel_size=1, dtype='auto', kv_cache_dtype='auto',
                       mamba_cache_dtype='auto', mamba_ssm_cache_dtype='auto', num_speculative_tokens=None,
                       speculative_config=None, block_size=None, platform=None, vllm_version=DEFAULT_VLLM_VERSION,
                       architecture=None):
    """Predict N with the intermediate values; returns a dict (see :func:`predict_block_size`).

    The dict's ``architecture`` is the model's (config.json); the hardware assumed is
    ``assumed_architecture`` (``sm90``, ``cpu``, ...) with ``architecture_source`` (``given`` or
    ``default for platform <p>``), ``attention_backend`` and ``kernel_block_size``."""
    config, result, user_block, kernel_min = _common_result(config, tensor_parallel_size, block_size, platform,
                                                            vllm_version, architecture)
    arch, tp, default_block = result['architecture'], result['tensor_parallel_size'], PLATFORMS[result['platform']][0]
    modern = _version_tuple(vllm_version) >= (0, 20, 0)
    if arch in DENSE_ARCHITECTURES:
        result.update({'hybrid': False, 'block_size': user_block or default_block})
        result.update(_dense_pages(config, tp, dtype, kv_cache_dtype))
        return result
    if arch not in HYBRID_GDN_ARCHITECTURES:
        raise ValueError('model family %s is unknown to the block-size predictor; known hybrid architectures: %s; '
                         'run the block-size probe instead' % (arch, ', '.join(HYBRID_GDN_ARCHITECTURES)))

    text = _text_config(config)
    model_dtype = _model_dtype(config, text, dtype)
    attn1 = _attn_page_of(text, tp, kv_cache_dtype, model_dtype)
    spec = _num_speculative_tokens(num_speculative_tokens, speculative_config)
    conv_dtype, ssm_dtype = _state_dtypes(arch, text, modern, model_dtype, mamba_cache_dtype, mamba_ssm_cache_dtype)
    mamba_page = _mamba_page(text, tp, spec, conv_dtype, ssm_dtype)
    block, align = _block_and_alignment(modern, user_block, default_block, kernel_min)
    attn_block = align * _cdiv(mamba_page, align * attn1)
    n = attn_block if block < attn_block else block
    attn_page = n * attn1
    result.update({
        'hybrid': True,
        'block_size': n,
        'logged': block < attn_block,
        'alignment': align,
        'model_dtype': model_dtype,
        'conv_dtype': conv_dtype,
        'ssm_dtype': ssm_dtype,
        'num_speculative_tokens': spec,
        'attn_page_size_per_token': attn1,
        # every layer's page has this size (GDN states are padded to it): what LMCache stores per token and rank
        'num_layers': _num_layers(text),
        'mamba_page_size': mamba_page,
        'attn_page_size': attn_page,
        'padding_percent': round(100.0 * (attn_page - mamba_page) / mamba_page, 2),
    })
    return result


def predict_block_size(config, **options):
    """Predict vLLM's block size N (int) for ``config`` (a parsed config.json mapping).

    Options: ``tensor_parallel_size`` (1), ``dtype`` ('auto'), ``kv_cache_dtype`` ('auto'),
    ``mamba_cache_dtype`` ('auto'), ``mamba_ssm_cache_dtype`` ('auto'), ``num_speculative_tokens``
    or ``speculative_config`` (dict), ``block_size`` (None), ``platform`` ('cuda' or 'cpu'; default
    from ``architecture``, else 'cuda'), ``architecture`` (the hardware: 'cpu', 'sm90', 'hopper',
    '9.0', 'NVIDIA H200', ...; default :data:`DEFAULT_ARCHITECTURES` of the platform),
    ``vllm_version`` ('0.32.0').  Dense architectures return their plain block size.
    Raises ValueError for unknown families or unusable configs.
    """
    return explain_block_size(config, **options)['block_size']
