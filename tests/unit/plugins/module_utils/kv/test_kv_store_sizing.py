# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/kv/kv_store_sizing.py: a pool's bytes per token and largest value from the model's
config (as LMCache lays out a hybrid's pages), the store's limits sized from them, and Debian's redis-server 7.0
reading those limits (a real server on a free loopback port)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_sizing as sizes
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import explain_block_size

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, '..', '..', '..', 'fixtures', 'models')
PASSWORD = 'correct-horse-battery-staple'
STORE = {'kv_store_bind': '0.0.0.0', 'kv_store_allow_network': True, 'kv_store_password': PASSWORD,
         'ansible_host': '10.0.0.9'}
REDIS = '/usr/bin/redis-server'
# tests/fixtures/models/qwen3-dense-tiny/config.json's fields that set its page
DENSE_TINY = {'architectures': ['Qwen3ForCausalLM'], 'num_hidden_layers': 2, 'num_attention_heads': 4,
              'num_key_value_heads': 2, 'head_dim': 128, 'hidden_size': 256, 'dtype': 'bfloat16'}


def config(name):
    with open(os.path.join(MODELS, name, 'config.json'), encoding='utf-8') as handle:
        return json.load(handle)


def pooled_plan(name, n, **settings):
    """A CUDA host of ``name`` in pool ``default`` planned with ``n`` and the prediction of its config."""
    prediction = explain_block_size(config(name), platform='cuda')
    cfg = dict({'vllm_server_model': 'Qwen/' + name, 'vllm_server_device': 'cuda', 'lmcache_server_kv_pool': 'default'},
               **settings)
    return host_plan.plan_host('gpu-1', cfg, n=n, n_kind='probed', prediction=prediction,
                               kv_stores={'store-1': STORE})


def test_the_27b_writes_every_layers_page_per_token():
    prediction = explain_block_size(config('qwen3.6-27b'), platform='cuda')
    # 16 attention + 48 Gated-DeltaNet layers, each page N x 2 x 4 KV heads x 256 x 2 B
    assert (prediction['block_size'], prediction['num_layers'], prediction['attn_page_size_per_token']) == (784, 64, 4096)
    per_token, why = sizes.bytes_per_token(prediction)
    assert why is None and per_token == {'rank': 262144, 'total': 262144}
    assert sizes.value_bytes(784, per_token['rank']) == 205520896
    # a chunk of 3N passes the servers' default proto-max-bulk-len (512 MiB)
    assert sizes.value_bytes(3 * 784, per_token['rank']) > sizes.DEFAULT_PROTO_MAX_BULK_LEN


def test_the_plan_shows_the_pools_bytes_per_token_value_and_break_even():
    result = pooled_plan('qwen3.6-27b', 784, lmcache_server_kv_prefill_tokens_per_second=11000)
    assert result['errors'] == []
    sizing = result['kv_pool']['sizing']
    assert sizing['bytes_per_token'] == 262144 and sizing['value_bytes'] == 205520896
    assert sizing['break_even_bytes_per_second'] == 262144 * 11000
    assert sizing['break_even_GB_per_second'] == round(262144 * 11000 / 1e9, 3)
    assert result['summary']['kv_break_even_GB_per_second'] == sizing['break_even_GB_per_second']
    four = pooled_plan('qwen3.6-27b', 784, lmcache_server_chunk_multiple=4)['kv_pool']['sizing']
    assert four['value_bytes'] == 4 * 205520896
    assert four['break_even_bytes_per_second'] is None
    assert 'lmcache_server_kv_prefill_tokens_per_second is not set' in four['break_even_unknown']


def test_tensor_parallel_ranks_split_the_value_but_not_the_bytes_per_token():
    sizing = kv_pool.sizing(explain_block_size(config('qwen3.6-27b'), platform='cuda', tensor_parallel_size=2),
                            {'chunk_size': 784}, {'tensor_parallel_size': 2}, 1000)
    assert sizing['bytes_per_token_rank'] == 131072 and sizing['bytes_per_token'] == 262144
    assert sizing['value_bytes'] == 784 * 131072


def test_without_a_config_the_sizes_are_unknown_and_say_why():
    sizing = kv_pool.sizing(None, {'chunk_size': 784}, {'tensor_parallel_size': 1}, 11000)
    assert sizing['value_bytes'] is None and sizing['break_even_bytes_per_second'] is None
    assert 'config.json was not read' in sizing['break_even_unknown']


@pytest.mark.parametrize('bad', [0, -5, 'fast'])
def test_a_bad_prefill_rate_is_refused_naming_the_variable(bad):
    result = pooled_plan('qwen3.6-27b', 784, lmcache_server_kv_prefill_tokens_per_second=bad)
    assert any('lmcache_server_kv_prefill_tokens_per_second' in e and 'gpu-1' in e for e in result['errors'])


def test_the_store_limits_follow_the_largest_value_of_its_pools():
    values = kv_pool.pool_values([pooled_plan('qwen3.6-27b', 784, lmcache_server_chunk_multiple=3),
                                  pooled_plan('qwen3.5-0.8b', 544)])
    plan = ks.plan_store('store-1', dict(STORE, kv_store_maxmemory_keys=4), None, pool_values=values)
    assert plan['errors'] == []
    largest = 3 * 205520896
    summary = plan['summary']
    assert summary['max_value_bytes'] == largest and summary['keys'] == 4
    assert summary['proto_max_bulk_len'] >= largest * sizes.BULK_HEADROOM
    assert summary['maxmemory'] == sizes.BASELINE_BYTES + 6 * sizes.allocated_bytes(largest)
    lines = plan['config_lines']
    assert 'proto-max-bulk-len %d' % summary['proto_max_bulk_len'] in lines
    assert 'client-output-buffer-limit normal 0 0 0' in lines
    query = [int(line.split()[1]) for line in lines if line.startswith('client-query-buffer-limit ')]
    assert query and query[0] > summary['proto_max_bulk_len']


def test_small_values_keep_the_servers_defaults_and_a_given_size_counts():
    settings = sizes.store_settings(26738688, None, 1024)
    assert settings['proto_max_bulk_len'] == sizes.DEFAULT_PROTO_MAX_BULK_LEN
    assert settings['client_query_buffer_limit'] == sizes.DEFAULT_CLIENT_QUERY_BUFFER_LIMIT
    assert settings['keys'] == sizes.keys_held(1024 * sizes.MIB, 26738688) > 0
    assert sizes.largest_value([], ['default'], 700 * sizes.MIB) == (700 * sizes.MIB, ['kv_store_max_value_bytes'])
    assert sizes.largest_value([{'host': 'a', 'pool': 'other', 'value_bytes': 9}], ['default']) == (None, [])


def test_the_store_says_how_long_a_prompt_it_keeps_whole_and_warns_about_longer_ones():
    """A store that holds fewer values than one prompt evicts that prompt's first chunks while it writes the last
    (LRU), and LMCache looks chunks up in order: such a prompt never hits (seen on the H200 with the 0.8B)."""
    long_27b = pooled_plan('qwen3.6-27b', 784, vllm_server_max_model_len=16384)
    values = kv_pool.pool_values([long_27b])
    assert values == [{'host': 'gpu-1', 'pool': 'default', 'value_bytes': 205520896, 'chunk_size': 784, 'ranks': 1,
                       'max_model_len': 16384}]
    # 24 values of 205,520,896 B (the GPU harness's store): 24 chunks of 784 tokens
    plan = ks.plan_store('store-1', dict(STORE, kv_store_maxmemory_keys=24), None, pool_values=values)
    assert plan['errors'] == [] and plan['warnings'] == []
    assert plan['summary']['prompt_tokens'] == 24 * 784
    assert plan['summary']['sizing_line'].endswith('(24 values; prompts of up to 18816 tokens stay whole)')
    # the role's default, 1024 MiB: 2 values besides the 2 in flight, so 1,568 tokens; a 16k prompt writes 21
    small = ks.plan_store('store-1', dict(STORE), None, pool_values=values)
    assert small['summary']['prompt_tokens'] == 2 * 784
    assert small['warnings'] == [
        'store store-1 keeps prompts of host gpu-1 whole up to 1568 tokens, but the host serves prompts of up to 16384 '
        'tokens (vllm_server_max_model_len): one that long writes 21 values and evicts its own first chunks, so it '
        'never hits; give the store at least %d MiB (kv_store_maxmemory_mb, or kv_store_maxmemory_keys in values of '
        'its largest pool value), or accept that longer prompts recompute'
        % -(-sizes.maxmemory_bytes(21, 205520896) // sizes.MIB)]
    # the size it names keeps the prompt whole; tensor parallelism writes one value per rank
    enough = -(-sizes.maxmemory_bytes(21, 205520896) // sizes.MIB)
    assert ks.plan_store('store-1', dict(STORE, kv_store_maxmemory_mb=enough), None, pool_values=values)['warnings'] == []
    two_ranks = dict(values[0], ranks=2)
    assert sizes.prompt_tokens(sizes.maxmemory_bytes(24, 205520896), [two_ranks], ['default']) == 12 * 784
    # no vllm_server_max_model_len (the model's own): the line says it, nothing is assumed
    model_len = ks.plan_store('store-1', dict(STORE), None, pool_values=kv_pool.pool_values(
        [pooled_plan('qwen3.6-27b', 784)]))
    assert model_len['warnings'] == [] and model_len['summary']['prompt_tokens'] == 1568
    # the 0.8B (N 544, 26,738,688 B per value) in the same store keeps much longer prompts whole than the 27B
    both = kv_pool.pool_values([long_27b, pooled_plan('qwen3.5-0.8b', 544)])
    assert sizes.prompt_tokens(1024 * sizes.MIB, both, ['default']) == 1568
    assert sizes.prompt_tokens(1024 * sizes.MIB, both[1:], ['default']) == \
        sizes.keys_held(1024 * sizes.MIB, both[1]['value_bytes']) * 544


def test_a_store_too_small_for_one_value_is_refused_with_the_size_it_needs():
    values = [{'host': 'gpu-1', 'pool': 'default', 'value_bytes': 205520896}]
    plan = ks.plan_store('store-1', dict(STORE, kv_store_maxmemory_mb=256), None, pool_values=values)
    assert len(plan['errors']) == 1
    error = plan['errors'][0]
    need = -(-sizes.maxmemory_bytes(1, 205520896) // sizes.MIB)
    assert 'kv_store_maxmemory_mb' in error and 'gpu-1' in error and 'at least %d' % need in error
    assert ks.plan_store('store-1', dict(STORE, kv_store_maxmemory_mb=need), None, pool_values=values)['errors'] == []


def test_keys_without_a_known_value_are_refused_only_where_the_pools_are_planned():
    settings = dict(STORE, kv_store_maxmemory_keys=8)
    # validate.yml and status.yml do not know the pools' plans: the store keeps kv_store_maxmemory_mb
    assert ks.plan_store('store-1', settings, None)['errors'] == []
    errors = ks.plan_store('store-1', settings, None, pool_values=[])['errors']
    assert len(errors) == 1 and 'kv_store_maxmemory_keys' in errors[0] and 'kv_store_max_value_bytes' in errors[0]
    given = ks.plan_store('store-1', dict(settings, kv_store_max_value_bytes=1000000), None, pool_values=[])
    assert given['errors'] == [] and given['summary']['keys'] == 8


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def resp(*words):
    return b''.join([b'*%d\r\n' % len(words)] + [b'$%d\r\n%s\r\n' % (len(w), w) for w in words])


def read_reply(stream):
    """One RESP reply from ``stream`` (a socket's binary file), as text: arrays joined by spaces."""
    line = stream.readline().rstrip(b'\r\n')
    kind, rest = line[:1], line[1:]
    if kind == b'$':
        size = int(rest)
        return '' if size < 0 else stream.read(size + 2)[:-2].decode('ascii', 'replace')
    if kind == b'*':
        return ' '.join(read_reply(stream) for _item in range(max(0, int(rest))))
    return line.decode('ascii', 'replace')


def set_zeros(port, key, size, user, password):
    """SET ``key`` to ``size`` zero bytes, streamed (the value is never held whole here); the server's reply."""
    with socket.create_connection(('127.0.0.1', port), timeout=60) as sock:
        stream = sock.makefile('rb')
        sock.sendall(resp(b'AUTH', user, password))
        assert read_reply(stream) == '+OK'
        sock.sendall(b'*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n' % (len(key), key, size))
        block, left = bytes(1 << 20), size
        try:
            while left:
                left -= sock.send(block[:min(left, len(block))])
            sock.sendall(b'\r\n')
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            return read_reply(stream)
        except ConnectionResetError:
            return ''


def command(port, user, password, *words):
    """The reply to one command sent as ``user``."""
    with socket.create_connection(('127.0.0.1', port), timeout=30) as sock:
        stream = sock.makefile('rb')
        sock.sendall(resp(b'AUTH', user, password) + resp(*words))
        assert read_reply(stream) == '+OK'
        return read_reply(stream)


@pytest.fixture(name='store')
def store_fixture(tmp_path):
    """A real redis-server with the plan's configuration for a 27B pool at chunk multiple 3 (its ACL file plus a
    test user that may read CONFIG), on a free loopback port."""
    if not os.path.exists(REDIS):
        pytest.skip('redis-server is not installed here')
    port = free_port()
    (tmp_path / 'data').mkdir()
    (tmp_path / 'etc').mkdir()
    values = [{'host': 'gpu-1', 'pool': 'default', 'value_bytes': 3 * 205520896}]
    plan = ks.plan_store('s', dict(STORE, kv_store_bind='127.0.0.1', kv_store_port=port, kv_store_maxmemory_keys=2,
                                   kv_store_home=str(tmp_path / 'data'), kv_store_config_dir=str(tmp_path / 'etc')),
                         None, pool_values=values)
    assert plan['errors'] == []
    conf = tmp_path / 'etc' / 'fleet-kv-store.conf'
    conf.write_text('\n'.join(line for line in plan['config_lines'] if line != 'supervised systemd') + '\n')
    (tmp_path / 'etc' / 'users.acl').write_text('\n'.join(plan['acl_lines'] + ['user probe on >probe-pass ~* +@all'])
                                                + '\n')
    server = subprocess.Popen([REDIS, str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for _attempt in range(100):
            try:
                if command(port, b'probe', b'probe-pass', b'PING') == '+PONG':
                    break
            except (OSError, AssertionError):
                time.sleep(0.05)
        yield {'port': port, 'plan': plan, 'server': server}
    finally:
        server.terminate()
        server.wait(10)


def test_redis_7_takes_the_sized_limits_and_a_value_above_512_mib(store):
    port, summary = store['port'], store['plan']['summary']
    for name, expected in (('proto-max-bulk-len', summary['proto_max_bulk_len']), ('maxmemory', summary['maxmemory'])):
        assert str(expected) in command(port, b'probe', b'probe-pass', b'CONFIG', b'GET', name.encode())
    buffers = command(port, b'probe', b'probe-pass', b'CONFIG', b'GET', b'client-output-buffer-limit')
    assert 'normal 0 0 0' in buffers
    # a 27B chunk of 3N (616,562,688 B), stored as LMCache's user, where the default limit refuses it
    value = 3 * 205520896
    assert set_zeros(port, b'fleet-test-3n', value, b'lmcache', PASSWORD.encode()) == '+OK'
    assert command(port, b'probe', b'probe-pass', b'STRLEN', b'fleet-test-3n') == ':%d' % value
    usage = command(port, b'probe', b'probe-pass', b'MEMORY', b'USAGE', b'fleet-test-3n')
    assert 0 <= int(usage[1:]) - sizes.size_class(value) <= sizes.KEY_OVERHEAD


def test_the_servers_default_limit_refuses_the_same_value(tmp_path):
    if not os.path.exists(REDIS):
        pytest.skip('redis-server is not installed here')
    port = free_port()
    server = subprocess.Popen([REDIS, '--port', str(port), '--bind', '127.0.0.1', '--save', '', '--dir', str(tmp_path),
                               '--user', 'probe', 'on', '>probe-pass', '~*', '+@all'],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for _attempt in range(100):
            try:
                command(port, b'probe', b'probe-pass', b'PING')
                break
            except (OSError, AssertionError):
                time.sleep(0.05)
        answer = set_zeros(port, b'fleet-test-3n', 3 * 205520896, b'probe', b'probe-pass')
        assert 'invalid bulk length' in answer or answer == ''
    finally:
        server.terminate()
        server.wait(10)


def test_a_dense_model_writes_its_layers_kv_per_token():
    prediction = explain_block_size(DENSE_TINY, platform='cpu')
    # 2 layers x 2 x 2 KV heads x 128 x 2 B
    assert sizes.bytes_per_token(prediction) == ({'rank': 2048, 'total': 2048}, None)
    minimal = explain_block_size({'architectures': ['Qwen3ForCausalLM'], 'num_key_value_heads': 2, 'head_dim': 128})
    assert sizes.bytes_per_token(minimal)[0] is None and 'layer count' in sizes.bytes_per_token(minimal)[1]
