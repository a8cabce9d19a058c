# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad inventory values are rejected by playbooks/deploy.yml before any host is contacted.

Every test inventory has a valid host and a host with one bad value; both point at an ssh
that does not exist, so a run that reached any host would show it. N-dependent values are
checked before the probe through ``vllm_server_expected_block_size`` (the N the operator
expects; the probe must later agree with it).
"""

from __future__ import annotations

import os

import pytest

from fleet_playbook_helpers import CONTACT_MARKERS, REPO_ROOT

GOOD_27B = {
    'vllm_server_model': 'Qwen/Qwen3.6-27B',
    'vllm_server_tensor_parallel_size': 2,
    'vllm_server_gpus': ['0', '1'],
    'vllm_server_expected_block_size': 784,
}
GOOD_08B = {
    'vllm_server_model': 'Qwen/Qwen3.5-0.8B',
    'vllm_server_expected_block_size': 544,
}

# (id, overrides of the bad host, expected parts of its message)
BAD_VALUES = [
    ('chunk-size-not-multiple-of-n', {'lmcache_server_chunk_size': 1000},
     ['host bad-01: lmcache_server_chunk_size=1000 is not a multiple of N=784; use 784 or 1568']),
    ('max-num-batched-tokens-below-n', {'vllm_server_max_num_batched_tokens': 500},
     ['host bad-01: vllm_server_max_num_batched_tokens=500 is below N=784', 'use 1567 (2N-1)']),
    ('max-num-batched-tokens-2n-without-separate-groups',
     {'vllm_server_max_num_batched_tokens': 1568, 'lmcache_server_separate_object_groups': False},
     ['host bad-01: vllm_server_max_num_batched_tokens=1568 is >= 2N=1568, which needs LMCache separate object groups',
      'set lmcache_server_separate_object_groups=true']),
    ('mamba-cache-mode-all', {'vllm_server_mamba_cache_mode': 'all'},
     ['host bad-01: vllm_server_mamba_cache_mode=all is not supported: GDN models do not support the all mode; use align']),
    ('prefix-caching-off', {'vllm_server_enable_prefix_caching': False},
     ['host bad-01: vllm_server_enable_prefix_caching=false turns prefix caching off', 'use true']),
    ('unknown-eviction-policy', {'lmcache_server_eviction_policy': 'FIFO'},
     ['host bad-01: lmcache_server_eviction_policy=FIFO is not an eviction policy of lmcache server',
      'use one of LRU, ARC, IsolatedLRU, noop']),
    ('negative-l1-size', {'lmcache_server_l1_size_gb': -1},
     ['host bad-01: lmcache_server_l1_size_gb=-1 is not a finite number > 0; use a number > 0']),
    ('port-out-of-range', {'vllm_server_port': 70000},
     ['host bad-01: vllm_server_port=70000 is not a TCP port; use an integer in 1..65535']),
    ('port-shared-by-both-services', {'lmcache_server_port': 8000, 'vllm_server_port': 8000},
     ['host bad-01: vllm_server_port=8000 is already used by lmcache_server_port on this host']),
    ('missing-model', {'vllm_server_model': ''},
     ['host bad-01: vllm_server_model="" is empty', 'Qwen/Qwen3.6-27B']),
    ('tp-not-matching-gpus', {'vllm_server_tensor_parallel_size': 2, 'vllm_server_gpus': ['0', '1', '2']},
     ['host bad-01: vllm_server_tensor_parallel_size=2 does not match the GPU list',
      'list exactly 2 GPU ids in vllm_server_gpus']),
    ('connector-on-cpu-hybrid-host', {'vllm_server_device': 'cpu', 'vllm_server_kv_connector': True},
     ['host bad-01: vllm_server_kv_connector=true is refused on a CPU host serving a hybrid model',
      'engine-driven transfer does not support multiple KV transfer groups now',
      'set vllm_server_kv_connector=false']),
    ('transfer-mode-mismatch',
     {'vllm_server_device': 'cpu', 'vllm_server_hybrid': False, 'vllm_server_expected_block_size': None,
      'lmcache_server_supported_transfer_mode': 'lmcache_driven'},
     ['host bad-01: vllm_server_lmcache_transfer_mode=null (resolves to engine_driven on cpu) is not accepted by '
      'lmcache_server_supported_transfer_mode=lmcache_driven',
      'set vllm_server_lmcache_transfer_mode=lmcache_driven or lmcache_server_supported_transfer_mode=auto']),
    ('lmcache-driven-on-cpu-with-two-users',
     {'vllm_server_device': 'cpu', 'vllm_server_hybrid': False, 'vllm_server_expected_block_size': None,
      'vllm_server_lmcache_transfer_mode': 'lmcache_driven'},
     ['host bad-01: lmcache_server_user=lmcache differs from vllm_server_user=vllm',
      "set lmcache_server_user and lmcache_server_group to vLLM's user and group"]),
    ('hybrid-without-connector-on-gpu', {'vllm_server_kv_connector': False},
     ['host bad-01: vllm_server_kv_connector=false leaves a hybrid model on a GPU host without LMCache']),
    ('chunk-multiple-zero', {'lmcache_server_chunk_multiple': 0},
     ['host bad-01: lmcache_server_chunk_multiple=0 is not an integer >= 1']),
    ('port-not-a-number', {'lmcache_server_http_port': 'eighty'},
     ['host bad-01: lmcache_server_http_port=eighty is not a TCP port; use an integer in 1..65535']),
]


def assert_rejected_before_contact(rc, out):
    assert rc != 0, out
    for marker in CONTACT_MARKERS:
        assert marker not in out, 'a host was contacted:\n' + out
    assert 'PLAY [Stage 2' not in out, out
    assert 'nothing was changed' in out, out


@pytest.mark.parametrize('overrides,expected', [case[1:] for case in BAD_VALUES], ids=[case[0] for case in BAD_VALUES])
def test_bad_value_is_rejected_before_any_host_is_contacted(runner, overrides, expected):
    bad = dict(GOOD_27B)
    bad.update(overrides)
    inventory = runner.write_inventory({'good-01': GOOD_08B, 'bad-01': bad})
    rc, out = runner.run('deploy.yml', inventory)
    assert_rejected_before_contact(rc, out)
    for part in expected:
        assert part in out, (part, out)
    assert 'host good-01:' not in out, out


def test_every_problem_of_every_host_is_listed_at_once(runner):
    inventory = runner.write_inventory({
        'bad-01': dict(GOOD_27B, lmcache_server_chunk_size=1000, vllm_server_port=70000),
        'bad-02': dict(GOOD_08B, vllm_server_mamba_cache_mode='all', lmcache_server_l1_size_gb=0),
    })
    rc, out = runner.run('deploy.yml', inventory)
    assert_rejected_before_contact(rc, out)
    assert '4 problem(s) in the inventory' in out, out
    for part in ('host bad-01: lmcache_server_chunk_size=1000', 'host bad-01: vllm_server_port=70000',
                 'host bad-02: vllm_server_mamba_cache_mode=all', 'host bad-02: lmcache_server_l1_size_gb=0'):
        assert part in out, (part, out)


def test_validate_playbook_runs_standalone(runner):
    inventory = runner.write_inventory({'bad-01': dict(GOOD_27B, vllm_server_mamba_cache_mode='all')})
    rc, out = runner.run('validate.yml', inventory)
    assert_rejected_before_contact(rc, out)
    # the problem is in the failure only (Ansible shows a failure's message on its error and its fatal line)
    assert out.count('host bad-01: vllm_server_mamba_cache_mode=all') == 2, out
    assert 'The fleet is valid' not in out


def test_good_inventory_passes_validation(runner):
    inventory = runner.write_inventory({'good-01': GOOD_08B, 'good-02': GOOD_27B})
    rc, out = runner.run('validate.yml', inventory)
    assert rc == 0, out
    assert ('The fleet is valid: 2 host(s) in 1 group(s) (vllm_hosts), 0 L2 pool(s) and 0 KV store(s) checked; '
            'no host was contacted.') in out, out


def test_example_inventory_passes_validation(runner):
    inventory = os.path.join(REPO_ROOT, 'inventories', 'example')
    rc, out = runner.run('validate.yml', inventory, '-e', 'ansible_ssh_executable=/nonexistent/ssh')
    assert rc == 0, out
    for marker in CONTACT_MARKERS:
        assert marker not in out, out
    for host in ('gpu-01', 'gpu-02', 'gpu-03'):
        assert 'ok: [%s]' % host in out, out


def test_example_inventory_without_its_api_key_is_refused(runner):
    inventory = os.path.join(REPO_ROOT, 'inventories', 'example')
    rc, out = runner.run('validate.yml', inventory, env={'FLEET_VLLM_API_KEY': None})
    assert_rejected_before_contact(rc, out)
    for host in ('gpu-01', 'gpu-02', 'gpu-03'):
        assert ('host %s: vllm_server_host=0.0.0.0 exposes vLLM beyond loopback without an API key; set vllm_server_api_key'
                % host) in out, out


@pytest.mark.parametrize('extra, expected', [
    (['-e', 'fleet_serial=0'], "fleet_serial='0' is neither a number of hosts >= 1 nor a percentage"),
    (['-e', '{"fleet_serial": [1, "150%"]}'], "is not a percentage in (0, 100]"),
    (['-e', 'fleet_max_fail_percentage=half'], "fleet_max_fail_percentage='half' is not a number in 0..100"),
    (['-e', 'fleet_warm_first_start=sometimes'], "fleet_warm_first_start='sometimes' is not a boolean"),
])
def test_a_wrong_rollout_variable_is_refused_before_any_host_is_contacted(runner, extra, expected):
    """deploy.yml's rollout variables (extra variables) are checked in stage 1, not when stage 4's play templates
    its serial after the hosts were installed and probed."""
    inventory = runner.write_inventory({'good-01': GOOD_08B})
    rc, out = runner.run('deploy.yml', inventory, *extra)
    assert_rejected_before_contact(rc, out)
    assert expected in out, out


def test_the_rollout_variables_may_come_from_the_environment(runner):
    inventory = runner.write_inventory({'good-01': GOOD_08B})
    rc, out = runner.run('validate.yml', inventory, env={'FLEET_SERIAL': '25%', 'FLEET_MAX_FAIL_PERCENTAGE': '200'})
    assert rc != 0 and "fleet_max_fail_percentage='200' is not a number in 0..100" in out, out
    assert 'fleet_serial=' not in out, out


def test_misspelt_group_is_refused(runner):
    inventory = runner.write_inventory({'good-01': GOOD_08B})
    rc, out = runner.run('deploy.yml', inventory, '-e', 'fleet_hosts=vlm_hosts')
    assert rc != 0, out
    assert 'no host matches fleet_hosts=vlm_hosts (groups in this inventory: vllm_hosts)' in out, out
    assert 'PLAY [Stage 2' not in out and 'PLAY RECAP' in out


def test_empty_inventory_is_refused(runner, tmp_path):
    path = tmp_path / 'empty.yml'
    path.write_text('all:\n  hosts: {}\n')
    rc, out = runner.run('deploy.yml', str(path))
    assert rc != 0, out
    assert 'no host matches fleet_hosts=vllm_hosts (groups in this inventory: none)' in out, out


def test_host_with_a_model_outside_the_fleet_is_refused(runner, tmp_path):
    import yaml
    inventory = {'all': {'hosts': {'stray-01': dict(GOOD_08B, ansible_connection='local')},
                         'children': {'vllm_hosts': {'hosts': {'good-01': dict(GOOD_08B, ansible_connection='local')}}}}}
    path = tmp_path / 'stray.yml'
    path.write_text(yaml.safe_dump(inventory))
    rc, out = runner.run('deploy.yml', str(path))
    assert rc != 0, out
    assert ('host(s) stray-01 set vllm_server_model but are not in fleet_hosts=vllm_hosts, so nothing would be '
            'deployed there') in out, out
    assert 'PLAY [Stage 2' not in out


@pytest.mark.parametrize('overrides, expected', [
    ({'vllm_server_modle': 'Qwen/Qwen3.5-0.8B'},
     'host bad-01: vllm_server_modle=Qwen/Qwen3.5-0.8B is not a variable of the lmcache_server or vllm_server role; '
     'did you mean vllm_server_model?'),
    ({'vllm_server_served_model_name': 'tiny\n'},
     "host bad-01: vllm_server_served_model_name='tiny\\\\n' holds a newline, which would cut or extend the unit file"),
    ({'vllm_server_extra_args': ['--max-num-batched-tokens', '16']},
     'sets --max-num-batched-tokens, which the collection manages; use vllm_server_max_num_batched_tokens instead'),
    ({'vllm_server_api_key': 12345},
     'host bad-01: vllm_server_api_key (value hidden) is a number, not a string; quote it in the inventory'),
    ({'vllm_server_service_name': 'lmcache-server'},
     'host bad-01: vllm_server_service_name=lmcache-server is also lmcache_server_service_name'),
    ({'lmcache_server_host': '0.0.0.0'},
     'host bad-01: lmcache_server_host=0.0.0.0 exposes the LMCache server (which has no authentication) beyond loopback'),
    ({'vllm_server_extra_args': ['--kv-transfer-config.kv_connector', 'X']},
     'sets --kv-transfer-config.kv_connector, which the collection manages; use vllm_server_kv_connector'),
    ({'lmcache_server_version': '0.5.6 '},
     'host bad-01: lmcache_server_version=0.5.6  has spaces around it; use one exact version such as "0.5.6" (PEP 440)'),
    ({'vllm_server_extra_args': ['--max-num-partial-prefills', '2']},
     'has \\"--max-num-partial-prefills\\", which is not an option of vllm serve 0.32.0; did you mean '
     '--max-num-active-seqs?; vllm serve refuses the command line otherwise'),
], ids=['misspelt-variable', 'newline', 'managed-flag', 'numeric-api-key', 'same-unit-name', 'lmcache-exposed',
        'dotted-json-sub-key', 'version-with-space', 'unknown-flag'])
def test_hostile_value_is_refused_end_to_end(runner, overrides, expected):
    inventory = runner.write_inventory({'good-01': GOOD_08B, 'bad-01': dict(GOOD_27B, **overrides)})
    rc, out = runner.run('deploy.yml', inventory)
    assert_rejected_before_contact(rc, out)
    assert expected in out, (expected, out[-3000:])
    assert '12345' not in out.split('PLAY [Validate', 1)[-1] or 'api_key' not in str(overrides)
