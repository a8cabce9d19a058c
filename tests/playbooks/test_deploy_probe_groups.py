# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy.yml with fleet_probe_per_group: hosts with identical inputs of N probe once, on the canary.

tests/playbooks/deploy_probe_groups.yml runs deploy.yml's own group task files with each host's inputs
of N given (what the probe module's compute_only returns) and the canaries' N given instead of a probe.
No host is contacted.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.fingerprint import (
    compute_fingerprint, fingerprint_inputs, service_fingerprint)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.hardware import hardware_identity
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


def run(runner, results, canary_n):
    hosts = {host: {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'} for host in results}
    inventory = runner.write_inventory(hosts)
    extra = runner.workdir / 'extra.json'
    extra.write_text(json.dumps({'test_probe_results': results, 'test_canary_n': canary_n}))
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


def test_a_canary_without_n_leaves_its_group_to_probe_on_their_own(runner):
    results = {'a-1': probe_result('GPU-a'), 'a-2': probe_result('GPU-b')}
    got, _output = run(runner, results, {'a-1': None})
    assert got['a-2']['n'] is None and got['a-2']['probe'] is None
