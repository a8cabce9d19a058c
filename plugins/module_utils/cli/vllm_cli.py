# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of vLLM's command line that the collection writes.

``N_INPUTS`` lists every input of vLLM's hybrid block size N that the collection passes as a
flag: its name (the key in the host plan's ``n_inputs``, the probe module's option and the
fingerprint's field), its flag, vLLM's default and how a value is normalised. The service's
argv (``host_plan``), the probe's argv (``_probe.launch.build_probe_argv``) and the fingerprint
(``fingerprint.fingerprint_inputs``) all read it: a new flag that changes N is added here.

``N_EXTRA_INPUTS`` lists the options of the pinned vLLM that change N and that the collection has
no variable for: they reach vLLM (and the probe, which runs with the service's extra arguments) only
through ``vllm_server_extra_args``. ``extra_n_inputs`` reads their values from those arguments (the
host plan's ``n_inputs['extra_n_inputs']``): the probe groups and the L2 pool key hash them, and the
prediction declines (the probe decides) when one is set to a value it does not model
(``unpredicted``). Every other input of N in vLLM 0.32.0 is a variable of the collection (above),
the model (its config.json and revision), the platform, the vLLM version or the hardware.

The managed-flag tables (every spelling vLLM's and LMCache's parsers accept) live beside it,
in ``vllm_cli_table`` and ``lmcache_cli_table`` (generated) and ``managed_flags``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import copy
import json

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import managed_flags
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli_table

# name: key in n_inputs, probe option and fingerprint field; flag: vLLM's flag; default: the value
# vLLM uses when the flag is absent; kind: int (default 1), choice ('auto' = vLLM's choice),
# optional_int (None = vLLM's choice), json (a mapping, None = off); service_always: the service's
# argv writes the flag even at its default (the unit file shows the value it runs with).
NInput = collections.namedtuple('NInput', 'name flag default kind service_always')

N_INPUTS = (
    NInput('tensor_parallel_size', '--tensor-parallel-size', 1, 'int', True),
    NInput('dtype', '--dtype', 'auto', 'choice', True),
    NInput('kv_cache_dtype', '--kv-cache-dtype', 'auto', 'choice', True),
    NInput('mamba_ssm_cache_dtype', '--mamba-ssm-cache-dtype', 'auto', 'choice', True),
    NInput('mamba_cache_dtype', '--mamba-cache-dtype', 'auto', 'choice', False),
    NInput('block_size', '--block-size', None, 'optional_int', False),
    NInput('speculative_config', '--speculative-config', None, 'json', False),
)
N_INPUT_NAMES = tuple(item.name for item in N_INPUTS)
# The model is vLLM's positional argument (``vllm serve MODEL``), an input of N too.
MODEL_POSITIONAL = 'model'


# dest: vLLM's option destination; flag: its option; predicted: the values the prediction models (the
# platform's default choice included), () for none; why: how it changes N (vLLM 0.32.0,
# vllm/platforms/interface.py update_block_size_for_backend unless said otherwise).
NExtraInput = collections.namedtuple('NExtraInput', 'dest flag predicted why')

N_EXTRA_INPUTS = (
    NExtraInput('kv_cache_dtype_skip_layers', '--kv-cache-dtype-skip-layers', (),
                'layers kept out of a quantized KV cache: vLLM aligns N a second time, after the Mamba alignment, '
                'so the quantized page covers the higher-precision one'),
    NExtraInput('attention_backend', '--attention-backend', ('FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN'),
                "the backend's smallest kernel block and its page layout align N (the prediction models the "
                'backends whose smallest kernel block is 16)'),
    NExtraInput('attention_config', '--attention-config', (),
                'carries the attention backend (its "backend" key), as --attention-backend'),
    NExtraInput('hf_overrides', '--hf-overrides', (),
                "changes the model's configuration (heads, head and state sizes, dtypes) that N is computed from"),
    NExtraInput('hf_config_path', '--hf-config-path', (),
                'reads the configuration N is computed from from another place than the model'),
)
N_EXTRA_DESTS = tuple(item.dest for item in N_EXTRA_INPUTS)


def extra_n_inputs(extra_args):
    """{dest: value} of the ``N_EXTRA_INPUTS`` that ``extra_args`` set, read as vLLM's parser reads them
    (any spelling it accepts); a value is the text after the flag, its values joined by a space, or
    True for a flag given without one. The last one given wins, as in argparse."""
    found = {}
    for dest, values in managed_flags.option_values(extra_args or [], vllm_cli_table.TABLE):
        if dest in N_EXTRA_DESTS:
            found[dest] = ' '.join(values) if values else True
    return found


def unpredicted(values):
    """The flags among ``values`` (``extra_n_inputs``) whose value the prediction does not model."""
    out = []
    for item in N_EXTRA_INPUTS:
        if item.dest in (values or {}) and str(values[item.dest]).upper() not in item.predicted:
            value = values[item.dest]
            out.append(item.flag if value is True else item.flag + ('' if value.startswith('.') else ' ') + value)
    return out


def canonical_json(value):
    """Deterministic JSON (sorted keys, no whitespace), as the argv and the fingerprint write it."""
    return json.dumps(value, sort_keys=True, separators=(',', ':'))


def normalize_json_option(value, name='speculative_config'):
    """A JSON option as a dict (or None for off) from a dict or a JSON string."""
    if value in (None, '', {}):
        return None
    if isinstance(value, dict):
        return copy.deepcopy(value)
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        raise ValueError('%s is not valid JSON: %r' % (name, value))
    if not isinstance(parsed, dict):
        raise ValueError('%s must be a JSON object, got %r' % (name, value))
    return parsed


def normalize(item, value):
    """The canonical value of one input of N (what the fingerprint hashes)."""
    if item.kind == 'int':
        return int(value or item.default)
    if item.kind == 'choice':
        text = '' if value is None else str(value).strip()
        return text or item.default
    if item.kind == 'optional_int':
        return int(value) if value else None
    return normalize_json_option(value, item.name)


def is_default(item, value):
    """True when ``value`` means vLLM's own default for this input."""
    if item.kind == 'int':
        return int(value or item.default) == item.default
    if item.kind == 'choice':
        return value in (None, '', item.default)
    return not value


def flag_value(item, value):
    """The text vLLM gets after the flag."""
    if item.kind == 'int':
        return str(int(value or item.default))
    if item.kind == 'optional_int':
        return str(int(value))
    if item.kind == 'json':
        return value if isinstance(value, str) else canonical_json(value)
    return str(value if value not in (None, '') else item.default)


def n_input_argv(values, explicit=True):
    """The flags that change N, from a mapping of input name to value.

    ``explicit=True`` (the service): the flags marked ``service_always`` are written even at
    vLLM's default; ``explicit=False`` (the probe): only values that differ from vLLM's default.
    """
    argv = []
    for item in N_INPUTS:
        value = values.get(item.name)
        if is_default(item, value) and not (explicit and item.service_always):
            continue
        argv += [item.flag, flag_value(item, value)]
    return argv


def n_input_values(values):
    """The normalised inputs of N (name -> value) for the fingerprint."""
    return dict((item.name, normalize(item, values.get(item.name))) for item in N_INPUTS)


def n_inputs_of(values):
    """The inputs of N among keyword arguments (``TypeError`` for a name that is not one)."""
    unknown = sorted(set(values) - set(N_INPUT_NAMES))
    if unknown:
        raise TypeError('not an input of N: %s' % ', '.join(unknown))
    return dict(values)
