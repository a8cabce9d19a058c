# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy.yml with fleet_probe_per_group: hosts with identical inputs of N probe once, on the canary.

tests/playbooks/deploy_probe_groups.yml runs the action probe_group's steps in the order of the role's probe.yml
with each host's inputs of N given (what the probe module returns without launching) and the canaries' N given
instead of a probe.
No host is contacted.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import (
    compute_fingerprint, fingerprint_inputs, service_fingerprint)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import hardware_identity
from fleet_playbook_helpers import REPO_ROOT, assert_no_contact

PLAYBOOK = os.path.join(REPO_ROOT, 'tests', 'playbooks', 'deploy_probe_groups.yml')


def probe_result(uuid, tp=1):
    """What block_size_probe returns with compute_only=true on a host with ``tp`` H200s."""
    gpus = [{'index': i, 'uuid': '%s-%d' % (uuid, i), 'name': 'NVIDIA H200', 'memory_total_mib': 143771,
             'driver_version': '580.159.04', 'compute_cap': '9.0'} for i in range(tp)]
    inputs = fingerprint_inputs({'kind': 'hub', 'id': 'Qwen/Qwen3.5-0.8B', 'revision': 'main'}, '0.32.0',
                                tensor_parallel_size=tp, probe_mode='shrunk', hardware=hardware_identity('cuda', gpus=gpus))
    return {'outcome': 'computed', 'inputs': inputs, 'fingerprint': compute_fingerprint(inputs),
            'service_fingerprint': service_fingerprint(inputs)}


def run(runner, results, canary_n, own_n=None, canary_m=None, **extra_vars):
    hosts = {host: {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'} for host in results}
    inventory = runner.write_inventory(hosts)
    extra = runner.workdir / 'extra.json'
    extra.write_text(json.dumps({'test_probe_results': results, 'test_canary_n': canary_n, 'test_own_n': own_n or {},
                                 'test_canary_m': canary_m or {}, **extra_vars}))
    code, output = runner.run(PLAYBOOK, inventory, '-e', '@%s' % extra)
    assert code == 0, output[-6000:]
    assert_no_contact(output)
    return {r['host']: r for r in (json.loads(m) for m in re.findall(r'FLEET-GROUP-RESULT (\{.*\})"', output.replace('\\"', '"')))}, output


def test_identical_hosts_take_the_canarys_n_with_their_own_fingerprints(runner):
    results = {'a-1': probe_result('GPU-a'), 'a-2': probe_result('GPU-b'), 'a-3': probe_result('GPU-c'),
               'b-1': probe_result('GPU-d', tp=2)}
    got, output = run(runner, results, {'a-1': 544, 'b-1': 784})
    assert set(got) == set(results)
    assert [(got[h]['group'], got[h]['canary'], got[h]['n']) for h in sorted(got)] == [
        ('G1', 'a-1', 544), ('G1', 'a-1', 544), ('G1', 'a-1', 544), ('G2', 'b-1', 784)]
    assert got['a-1']['probe']['source'] == 'probe'
    for host in ('a-2', 'a-3'):
        probe = got[host]['probe']
        assert probe['source'] == 'group' and probe['canary'] == 'a-1' and probe['group'] == 'G1'
        # the unit records this host's own service fingerprint, not the canary's
        assert probe['service_fingerprint'] == results[host]['service_fingerprint']
        assert probe['service_fingerprint'] != results['a-1']['service_fingerprint']
    assert 'probe group G1: 3 host(s), probed on a-1, taken by a-2, a-3' in output
    assert 'probe group G2: 1 host(s), probed on b-1' in output


def test_without_probe_groups_every_host_is_a_group_of_its_own_and_probes_itself(runner):
    """fleet_probe_per_group=false takes the same path: identical hosts each form a group of one and probe."""
    results = {'a-1': probe_result('GPU-a'), 'a-2': probe_result('GPU-b')}
    got, output = run(runner, results, {'a-1': 544, 'a-2': 544}, fleet_probe_per_group='false')
    assert [(got[h]['group'], got[h]['canary'], got[h]['n'], got[h]['probe']['source']) for h in sorted(got)] == [
        ('G1', 'a-1', 544, 'probe'), ('G2', 'a-2', 544, 'probe')]
    assert 'probe group G2: 1 host(s), probed on a-2' in output and 'taken by' not in output


def test_a_canary_without_n_leaves_its_group_to_probe_on_their_own(runner):
    results = {'a-1': probe_result('GPU-a'), 'a-2': probe_result('GPU-b')}
    got, _output = run(runner, results, {'a-1': None})
    assert got['a-2']['n'] is None and got['a-2']['probe'] is None


def test_a_host_with_its_own_n_is_the_canary_and_keeps_it_nothing_is_probed(runner):
    # a-2 already has N (its cache or its running service): it becomes the canary, a-1 and a-3 take its N
    # without any probe; b-1 has its own N too and keeps it although it differs from nobody's
    results = {'a-1': probe_result('GPU-a'), 'a-2': probe_result('GPU-b'), 'a-3': probe_result('GPU-c')}
    got, output = run(runner, results, {}, own_n={'a-2': 544}, canary_m={'a-2': 604})
    expected = [('a-1', 'a-2', 544), ('a-2', 'a-2', 544), ('a-3', 'a-2', 544)]
    assert [(h, got[h]['canary'], got[h]['n']) for h in sorted(got)] == expected
    assert got['a-2']['probe']['source'] == 'cache'
    assert got['a-1']['probe']['source'] == 'group' and got['a-3']['probe']['source'] == 'group'
    # the Mamba cache blocks vLLM reported on the canary go with its N (same inputs of M)
    assert got['a-1']['m'] == {'mamba_cache_blocks': 604, 'source': 'refusal', 'group': 'G1', 'canary': 'a-2'}
    assert 'probe group G1: 3 host(s), probed on a-2, taken by a-1, a-3' in output


def test_a_host_with_its_own_n_keeps_it_inside_a_group(runner):
    results = {'a-1': probe_result('GPU-a'), 'a-2': probe_result('GPU-b')}
    got, _output = run(runner, results, {}, own_n={'a-1': 544, 'a-2': 560})
    assert (got['a-1']['n'], got['a-2']['n']) == (544, 560)
    assert got['a-2']['probe']['source'] == 'cache' and got['a-2']['m'] is None
