# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run by a venv's python (test_kv_store_cluster_real.py) against a store cluster; reads the ``--l2-adapter`` JSON
(with the password) from stdin and prints one JSON line.

``lmcache`` (an LMCache venv with glide_sync): builds LMCache's own valkey L2 adapter as ``lmcache server`` does
(``add_l2_adapters_args`` / ``parse_args_to_l2_adapters_config`` / ``create_l2_adapter_from_registry``), stores
``CHUNKS`` chunks through it, looks them up (and one never stored), loads them back into fresh buffers:
``{"cluster_mode", "stored", "stored_bytes", "found", "missing_found", "loaded", "equal", "wire_keys"}``.

``glide`` (glide_sync only; LMCache's valkey modules need LMCache's full dependencies): builds the
``GlideClusterClient`` from the JSON's fields as LMCache 0.5.6's ``ValkeyWorkerPool._get_client`` does (positional
``ServerCredentials(username, password)``, every startup node, cluster configuration), SETs and GETs ``CHUNKS``
keys ``<key_prefix>@fleet-glide@...``: ``{"cluster_mode", "stored", "equal", "wire_keys"}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

CHUNKS = 24
SIZE = 4096


def wait(poll, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = poll()
        if result is not None:
            return result
        time.sleep(0.01)
    raise SystemExit('no %s result within %.0f s' % (what, timeout))


def bits(bitmap, count):
    return [bool(bitmap.test(i)) for i in range(count)]


def with_lmcache(text):
    from lmcache.v1.distributed.api import ObjectKey
    from lmcache.v1.distributed.l2_adapters.config import add_l2_adapters_args, parse_args_to_l2_adapters_config
    from lmcache.v1.distributed.l2_adapters.factory import create_l2_adapter_from_registry
    from lmcache.v1.memory_management import BytesBufferMemoryObj

    parser = add_l2_adapters_args(argparse.ArgumentParser())
    config = parse_args_to_l2_adapters_config(parser.parse_args(['--l2-adapter', text]))
    adapter = create_l2_adapter_from_registry(config.adapters[0])
    try:
        keys = [ObjectKey(chunk_hash=hashlib.sha256(b'chunk %d' % i).digest(), model_name='fleet-test', kv_rank=0)
                for i in range(CHUNKS)]
        data = [hashlib.sha256(b'page %d' % i).digest() * (SIZE // 32) for i in range(CHUNKS)]
        task = adapter.submit_store_task(keys, [BytesBufferMemoryObj(d) for d in data])
        stored = wait(lambda: adapter.pop_completed_store_tasks().get(task), 'store')
        absent = [ObjectKey(chunk_hash=hashlib.sha256(b'never stored').digest(), model_name='fleet-test', kv_rank=0)]
        task = adapter.submit_lookup_and_lock_task(keys + absent, {})
        found = bits(wait(lambda: adapter.query_lookup_and_lock_result(task), 'lookup'), CHUNKS + 1)
        adapter.submit_unlock(keys)
        buffers = [bytearray(SIZE) for _chunk in range(CHUNKS)]
        task = adapter.submit_load_task(keys, [BytesBufferMemoryObj(b) for b in buffers])
        loaded = bits(wait(lambda: adapter.query_load_result(task), 'load'), CHUNKS)
        return {'cluster_mode': adapter.report_status().get('cluster_mode'),
                'stored': stored.is_successful(), 'stored_bytes': stored.bytes_transferred(),
                'found': found[:CHUNKS], 'missing_found': found[CHUNKS], 'loaded': loaded,
                'equal': [bytes(b) == d for b, d in zip(buffers, data)],
                'wire_keys': [adapter._wire_key(k) for k in keys]}
    finally:
        adapter.close()


def with_glide(text):
    import glide_sync

    spec = json.loads(text)
    nodes = [node.rsplit(':', 1) for node in spec['startup_nodes'].split(',')]
    config = glide_sync.GlideClusterClientConfiguration(
        addresses=[glide_sync.NodeAddress(host, int(port)) for host, port in nodes], request_timeout=5000,
        use_tls=False, advanced_config=glide_sync.AdvancedGlideClusterClientConfiguration(connection_timeout=10000),
        credentials=glide_sync.ServerCredentials(spec['username'], spec['password']))
    client = glide_sync.GlideClusterClient.create(config)
    try:
        keys = ['%s@fleet-glide@00000000@0@%s' % (spec['key_prefix'], hashlib.sha256(b'chunk %d' % i).hexdigest())
                for i in range(CHUNKS)]
        data = [hashlib.sha256(b'page %d' % i).digest() * (SIZE // 32) for i in range(CHUNKS)]
        stored = [client.set(k, d) == 'OK' for k, d in zip(keys, data)]
        return {'cluster_mode': bool(spec['cluster_mode']), 'stored': all(stored),
                'equal': [client.get(k) == d for k, d in zip(keys, data)], 'wire_keys': keys}
    finally:
        client.close()


def main():
    text = sys.stdin.read()
    print(json.dumps(with_lmcache(text) if sys.argv[1] == 'lmcache' else with_glide(text)))


if __name__ == '__main__':
    main()
