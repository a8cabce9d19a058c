# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How large an L2 pool's values are, and the store settings that follow from them (the one place for both).

LMCache (0.5.x, ``LMCacheMPConnector`` with ``--separate-object-groups``) writes one key per chunk and rank that
holds every layer's page for the chunk's tokens. For a hybrid (Gated-DeltaNet) model vLLM gives every layer the
same page, the attention page of N tokens (the GDN state is padded to it), so one token costs
``num_layers x attention page per token`` on one rank (:func:`bytes_per_token`), and the largest value of a pool
is ``chunk size x that`` (:func:`value_bytes`; the chunk is N or a multiple k x N). Qwen3.6-27B (bf16, TP 1,
N 784): 64 x 4,096 B = 256 KiB per token, 205,520,896 B per key at k = 1. Whether a chunk of k x N holds one GDN
state or k is not known: the value is counted with k (an upper bound, the safe side for the limits below).

A prompt of L tokens on a host of chunk size C and tensor-parallel size T writes ceil(L / C) x T values, and the
store evicts the least recently used ones: a store that holds fewer values than one prompt evicts that prompt's
first chunks while it writes the last, and LMCache looks chunks up in order, so such a prompt never hits.
:func:`prompt_tokens` says how long a prompt the store keeps whole, :func:`longer_prompts` which hosts serve longer
ones (their ``vllm_server_max_model_len``).

The store (Redis 7.0 / Valkey) refuses a value above ``proto-max-bulk-len`` (default 512 MiB: a 27B key at k = 3)
and closes a client whose query buffer (the whole SET) passes ``client-query-buffer-limit`` (default 1 GiB);
:func:`store_settings` sets both above the largest value. A reply (a GET) waits in the client's output buffer,
which Redis counts in ``used_memory``: ``maxmemory`` counted in keys (``kv_store_maxmemory_keys``) leaves room for
``IN_FLIGHT_VALUES`` such buffers besides the keys. The store allocates a value in jemalloc's size classes
(:func:`allocated_bytes`; 205,520,896 B take 234,881,024 B, measured with ``MEMORY USAGE`` on redis-server 7.0.15).
"""

from __future__ import annotations

MIB = 1 << 20
# The servers' defaults (Redis 7.0 and Valkey): what the configuration keeps when the values are small.
DEFAULT_PROTO_MAX_BULK_LEN = 512 * MIB
DEFAULT_CLIENT_QUERY_BUFFER_LIMIT = 1024 * MIB
# The replicas' output buffer (the collection creates none; a replica added by hand must still get a full value).
DEFAULT_REPLICA_BUFFER = 256 * MIB
# Room above the largest value: a key name and RESP framing in the query buffer, and a chunk size that grows a
# little (another N after an upgrade) before the next deploy.
BULK_HEADROOM = 1.25
QUERY_BUFFER_EXTRA = 64 * MIB
# Bytes a key takes beyond its value's allocation: the key name (LMCache's prefix, model, rank and hash: about
# 150 characters), the dict entry and the object header (MEMORY USAGE reports 56 B for a 5-character key).
KEY_OVERHEAD = 256
# Values in flight that Redis counts in used_memory besides the keys (a SET's query buffer, a GET's reply).
IN_FLIGHT_VALUES = 2
# The server's own memory (dicts, buffers, Lua) at start.
BASELINE_BYTES = 8 * MIB


def bytes_per_token(prediction, tensor_parallel_size=1):
    """``({'rank': B per token and rank, 'total': B per token over all ranks}, None)`` from a prediction
    (``block_size_predict.explain_block_size``: ``attn_page_size_per_token`` of one rank and ``num_layers``; a dense
    model's layers hold only their KV, the same formula), or ``(None, why it is unknown)``."""
    if not isinstance(prediction, dict):
        return None, 'the model\'s config.json was not read (no prediction), so its page size is unknown'
    per_token, layers = prediction.get('attn_page_size_per_token'), prediction.get('num_layers')
    if not isinstance(per_token, int) or not isinstance(layers, int) or per_token < 1 or layers < 1:
        return None, 'the model\'s config.json has no page size or layer count the prediction reads'
    rank = per_token * layers
    return {'rank': rank, 'total': rank * max(1, int(tensor_parallel_size or 1))}, None


def value_bytes(chunk_size, per_token_rank):
    """The largest value a host writes: one chunk of one rank (every layer's page for ``chunk_size`` tokens)."""
    return int(chunk_size) * int(per_token_rank)


def size_class(size):
    """The bytes jemalloc (Redis's and Valkey's allocator) gives a request of ``size`` bytes: four classes per
    power of two above 64 B, 16-byte steps below."""
    size = max(1, int(size))
    if size <= 64:
        return -(-size // 16) * 16
    step = 1 << max(4, (size - 1).bit_length() - 3)
    return -(-size // step) * step


def allocated_bytes(value):
    """What one key of a ``value``-byte value takes in the store."""
    return size_class(value) + KEY_OVERHEAD


def _round_mib(size):
    return -(-int(size) // MIB) * MIB


def maxmemory_bytes(keys, value):
    """``maxmemory`` that holds ``keys`` values of ``value`` bytes with room for the values in flight."""
    return BASELINE_BYTES + (int(keys) + IN_FLIGHT_VALUES) * allocated_bytes(value)


def keys_held(maxmemory, value):
    """How many values of ``value`` bytes a store of ``maxmemory`` bytes holds (room for those in flight kept)."""
    return max(0, (int(maxmemory) - BASELINE_BYTES) // allocated_bytes(value) - IN_FLIGHT_VALUES)


def store_settings(value, maxmemory_keys=None, maxmemory_mb=None):
    """The store's limits for a largest value of ``value`` bytes (None: unknown, the servers' defaults stay):
    ``{proto_max_bulk_len, client_query_buffer_limit, replica_buffer, maxmemory, keys}`` (bytes; ``keys``: the
    values it holds, None when ``value`` is unknown)."""
    bulk = DEFAULT_PROTO_MAX_BULK_LEN
    if value:
        bulk = max(DEFAULT_PROTO_MAX_BULK_LEN, _round_mib(value * BULK_HEADROOM))
    query = max(DEFAULT_CLIENT_QUERY_BUFFER_LIMIT, bulk + QUERY_BUFFER_EXTRA)
    replica = DEFAULT_REPLICA_BUFFER if not value else max(DEFAULT_REPLICA_BUFFER, _round_mib(2 * value))
    if maxmemory_keys and value:
        maxmemory = maxmemory_bytes(maxmemory_keys, value)
    else:
        maxmemory = int(maxmemory_mb or 0) * MIB
    return {'proto_max_bulk_len': bulk, 'client_query_buffer_limit': query, 'replica_buffer': replica,
            'maxmemory': maxmemory, 'keys': keys_held(maxmemory, value) if value else None}


def config_lines(settings):
    """The configuration lines of :func:`store_settings` (redis.conf / valkey.conf syntax, sizes in bytes)."""
    replica = settings['replica_buffer']
    return ['maxmemory %d' % settings['maxmemory'],
            'proto-max-bulk-len %d' % settings['proto_max_bulk_len'],
            'client-query-buffer-limit %d' % settings['client_query_buffer_limit'],
            # A GET's reply is never cut (a normal client's output buffer has no limit, as the default).
            'client-output-buffer-limit normal 0 0 0',
            'client-output-buffer-limit replica %d %d 60' % (replica, replica // 2)]


def largest_value(pool_values, pools, given=None):
    """``(largest value in bytes or None, [hosts it comes from])`` of the pools ``pools`` a store serves, from
    ``pool_values`` (``[{host, pool, value_bytes}]`` of the serving hosts' plans) and ``given``
    (kv_store_max_value_bytes), whichever is larger."""
    found = [v for v in pool_values or [] if isinstance(v, dict) and v.get('pool') in (pools or [])
             and isinstance(v.get('value_bytes'), int) and v['value_bytes'] > 0]
    largest = max([v['value_bytes'] for v in found] + [int(given or 0)]) or None
    hosts = sorted(set(str(v['host']) for v in found if v['value_bytes'] == largest))
    return largest, hosts + (['kv_store_max_value_bytes'] if given and int(given) == largest else [])


def _pooled(pool_values, pools):
    return [v for v in pool_values or [] if isinstance(v, dict) and v.get('pool') in (pools or [])
            and isinstance(v.get('chunk_size'), int) and v['chunk_size'] > 0
            and isinstance(v.get('value_bytes'), int) and v['value_bytes'] > 0]


def _whole(maxmemory, value):
    """The longest prompt (tokens) a store of ``maxmemory`` bytes keeps whole for one host's values."""
    return (keys_held(maxmemory, value['value_bytes']) // max(1, int(value.get('ranks') or 1))) * value['chunk_size']


def prompt_tokens(maxmemory, pool_values, pools):
    """The longest prompt (tokens) a store of ``maxmemory`` bytes keeps whole for the most demanding host of its
    pools (``pool_values``: kv_pool.pool_values, each host's value, chunk size and ranks), or None when unknown."""
    found = _pooled(pool_values, pools)
    return min(_whole(maxmemory, v) for v in found) if maxmemory and found else None


def longer_prompts(maxmemory, pool_values, pools):
    """``[{host, max_model_len, whole, values, maxmemory_mb}]``: the hosts whose ``vllm_server_max_model_len`` is
    longer than a store of ``maxmemory`` bytes keeps whole (``values``: what one prompt that long writes,
    ``maxmemory_mb``: the store that keeps it whole)."""
    out = []
    for v in _pooled(pool_values, pools) if maxmemory else []:
        length = v.get('max_model_len')
        if isinstance(length, int) and length > _whole(maxmemory, v):
            values = -(-length // v['chunk_size']) * max(1, int(v.get('ranks') or 1))
            out.append({'host': v['host'], 'max_model_len': length, 'whole': _whole(maxmemory, v), 'values': values,
                        'maxmemory_mb': -(-maxmemory_bytes(values, v['value_bytes']) // MIB)})
    return out


def summary_line(host, settings):
    """One line of plan.yml for a store: its largest value and the limits that follow."""
    if not settings.get('max_value_bytes'):
        return ('store %s: the largest value of its pools is unknown (no pooled host with a known page size, no '
                'kv_store_max_value_bytes): the servers\' default limits, maxmemory %d B' % (host, settings['maxmemory']))
    whole = settings.get('prompt_tokens')
    return ('store %s: largest value %d B (%s), proto-max-bulk-len %d, client-query-buffer-limit %d, maxmemory %d B '
            '(%s values%s)' % (host, settings['max_value_bytes'], ', '.join(settings.get('max_value_from') or []),
                               settings['proto_max_bulk_len'], settings['client_query_buffer_limit'],
                               settings['maxmemory'], 'no limit on' if settings['keys'] is None else settings['keys'],
                               '' if whole is None else '; prompts of up to %d tokens stay whole' % whole))
