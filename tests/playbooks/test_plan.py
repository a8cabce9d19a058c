# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/plan.yml: N predicted on the control node, every host's units rendered, fleet table written.

The example inventory's hosts do not exist (and the test inventory points at an ssh that does
not exist): the plan must never contact them. Model configurations come from a fake Hugging
Face cache (HF_HOME) built from tests/fixtures/models, or from ``vllm_server_model_config``.
"""

from __future__ import annotations

import json
import os
import re

from fleet_playbook_helpers import EXAMPLE, REPO_ROOT, assert_no_contact, fail_messages, read
from systemd_unit import parse_exec, parse_unit, values

PLAN_INVENTORY = os.path.join(REPO_ROOT, 'tests', 'playbooks', 'inventories', 'plan')


def exec_start(text):
    """The argv systemd runs for the unit's ExecStart=."""
    (value,) = values(parse_unit(text), 'Service', 'ExecStart')
    return parse_exec(value, {})[1]


def test_plan_example_fleet(runner, hf_env, tmp_path):
    plan = tmp_path / 'plan'
    code, output = runner.run('plan.yml', EXAMPLE, '-e', 'fleet_plan_dir=%s' % plan)
    assert code == 0, output[-6000:]
    assert_no_contact(output)

    expected = {
        'gpu-01': {'n': 784, 'chunk': 784, 'mnbt': 1567, 'tp': 2, 'vllm_port': 8000, 'lmcache_port': 5555, 'http_port': 8080},
        'gpu-02': {'n': 1568, 'chunk': 3136, 'mnbt': 3135, 'tp': 4, 'vllm_port': 8001, 'lmcache_port': 5556, 'http_port': 8081},
        'gpu-03': {'n': 544, 'chunk': 544, 'mnbt': 1087, 'tp': 1, 'vllm_port': 8000, 'lmcache_port': 5555, 'http_port': 8080},
    }
    for host, want in expected.items():
        record = json.loads(read(str(plan / host / 'plan.json')))
        assert record['block_size'] == want['n']
        assert record['block_size_source'] == 'predicted'
        assert record['prediction']['platform'] == 'cuda'
        assert record['prediction']['hybrid'] is True
        assert record['derived']['chunk_size'] == want['chunk']
        assert record['derived']['max_num_batched_tokens'] == want['mnbt']

        vllm_unit = read(str(plan / host / 'etc' / 'systemd' / 'system' / 'vllm.service'))
        assert 'N=%d)' % want['n'] in vllm_unit
        assert '--max-num-batched-tokens %d' % want['mnbt'] in vllm_unit
        assert '--tensor-parallel-size %d' % want['tp'] in vllm_unit
        assert '--port %d' % want['vllm_port'] in vllm_unit
        argv = exec_start(vllm_unit)
        transfer = json.loads(argv[argv.index('--kv-transfer-config') + 1])
        assert transfer['kv_connector_extra_config']['lmcache.mp.port'] == want['lmcache_port']
        assert '--mamba-cache-mode align' in vllm_unit and '--enable-prefix-caching' in vllm_unit

        lmcache_unit = read(str(plan / host / 'etc' / 'systemd' / 'system' / 'lmcache-server.service'))
        assert '--chunk-size %d' % want['chunk'] in lmcache_unit
        assert '--port %d' % want['lmcache_port'] in lmcache_unit
        assert '--http-port %d' % want['http_port'] in lmcache_unit

        env = read(str(plan / host / 'etc' / 'lmcache-vllm-fleet' / 'vllm.env'))
        assert 'VLLM_API_KEY="<redacted>"' in env and 'HF_TOKEN="<redacted>"' in env
        assert oct(os.stat(str(plan / host / 'etc' / 'lmcache-vllm-fleet' / 'vllm.env')).st_mode & 0o777) == '0o600'

    # the exact flags of the example's first host
    gpu01 = read(str(plan / 'gpu-01' / 'etc' / 'systemd' / 'system' / 'lmcache-server.service'))
    assert '--chunk-size 784' in gpu01 and '--max-gpu-workers 2' in gpu01
    assert '--max-num-batched-tokens 1567' in read(str(plan / 'gpu-01' / 'etc' / 'systemd' / 'system' / 'vllm.service'))
    gpu02 = read(str(plan / 'gpu-02' / 'etc' / 'systemd' / 'system' / 'vllm.service'))
    assert '--kv-cache-dtype fp8' in gpu02 and '--attention-backend FLASHINFER' in gpu02

    for secret in ('secret-api-key-value', 'hf_secret_token_value'):
        for root, _dirs, files in os.walk(str(plan)):
            for name in files:
                assert secret not in read(os.path.join(root, name)), os.path.join(root, name)
        assert secret not in output

    markdown = read(str(plan / 'fleet.md'))
    html = read(str(plan / 'fleet.html'))
    for host, want in expected.items():
        row = [line for line in markdown.splitlines() if line.startswith('| %s |' % host)]
        assert len(row) == 1, markdown
        cells = [cell.strip() for cell in row[0].strip('|').split('|')]
        assert cells[3] == "sm90 (default for platform cuda)" and cells[4] == str(want["tp"])
        assert str(want['n']) in cells and str(want['chunk']) in cells and str(want['mnbt']) in cells
        assert cells[-3:] == [str(want['vllm_port']), str(want['lmcache_port']), str(want['http_port'])]
        match = re.search(r'<tr id="host-%s">(.*?)</tr>' % re.escape(host), html)
        assert match, html
        for value in (want['n'], want['chunk'], want['mnbt'], want['vllm_port']):
            assert '>%d<' % value in match.group(1)
    assert '| gpu-02 | Qwen/Qwen3.6-27B | cuda | sm90 (default for platform cuda) | 4 | 0,1,2,3 | bfloat16 | fp8 | bfloat16 / float32 | 1568 |' in markdown
    # self-contained: inline CSS, no external asset
    assert '<style>' in html
    assert not re.search(r'<link|<script|src=|url\(|https?://', html)


def test_plan_test_fleet_overrides_cpu_dense_and_fallback(runner, monkeypatch, tmp_path):
    monkeypatch.delenv('HF_HUB_CACHE', raising=False)
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'empty-hf'))
    plan = tmp_path / 'plan'
    code, output = runner.run('plan.yml', PLAN_INVENTORY, '-e', 'fleet_plan_dir=%s' % plan)
    assert code == 0, output[-6000:]
    assert_no_contact(output)

    def record(host):
        return json.loads(read(str(plan / host / 'plan.json')))

    def unit(host, name):
        return read(str(plan / host / 'etc' / 'systemd' / 'system' / name))

    # config.json directory override, TP 2
    assert record('plan-27b')['block_size'] == 784
    assert '--chunk-size 784' in unit('plan-27b', 'lmcache-server.service')
    assert '--max-num-batched-tokens 1567' in unit('plan-27b', 'vllm.service')
    # config.json file override on a CPU host: CPU default block 128, kernel multiple of 32
    cpu = record('plan-cpu')
    assert cpu['block_size'] == 640 and cpu['prediction']['platform'] == 'cpu'
    assert '--max-num-batched-tokens 1279' in unit('plan-cpu', 'vllm.service')
    assert '--kv-transfer-config' not in unit('plan-cpu', 'vllm.service')
    # the configuration given inline (Qwen3-Next: bf16 SSM state), chunks of two blocks
    assert record('plan-next')['block_size'] == 544
    assert record('plan-next')['prediction']['ssm_dtype'] == 'bfloat16'
    assert '--chunk-size 1088' in unit('plan-next', 'lmcache-server.service')
    # a dense model: not hybrid, CUDA block 16, LMCache's chunk 256, vLLM's own batching default
    dense = record('plan-dense')
    assert dense['block_size'] == 16 and dense['derived']['hybrid'] is False
    assert '--chunk-size 256' in unit('plan-dense', 'lmcache-server.service')
    assert '--max-num-batched-tokens' not in unit('plan-dense', 'vllm.service')
    # no config.json on the control node: planned with vllm_server_expected_block_size, with a warning
    fallback = record('plan-expected')
    assert fallback['block_size'] == 784 and fallback['block_size_source'] == 'expected'
    assert 'model Example/Not-On-This-Machine: config.json not found on the control node' in fallback['prediction_problem']
    assert 'planned with vllm_server_expected_block_size=784' in output
    # the fallback is one warning line: no error output, the sentence once
    assert '[ERROR]' not in output and 'fatal:' not in output, output[-6000:]
    assert output.count('config.json not found on the control node') == 1, output[-6000:]
    assert '[WARNING]: host plan-expected: model Example/Not-On-This-Machine' in output

    markdown = read(str(plan / 'fleet.md'))
    # the hardware N was predicted for, and where that came from
    assert record('plan-27b')['prediction']['assumed_architecture'] == 'sm90'
    assert '| sm90 (default for platform cuda) |' in markdown and '| cpu (default for platform cpu) |' in markdown
    for host in ('plan-27b', 'plan-cpu', 'plan-next', 'plan-dense', 'plan-expected'):
        assert '| %s |' % host in markdown
        assert 'id="host-%s"' % host in read(str(plan / 'fleet.html'))
    assert '| 784 | expected | 784 |' in markdown


def test_bad_value_fails_like_validate(runner, hf_env, tmp_path):
    """A value that does not fit N fails the plan with validate.yml's (and so deploy's) message, before any file is written."""
    bad = ('-e', 'vllm_server_max_num_batched_tokens=500')
    code, validate_output = runner.run('validate.yml', EXAMPLE, *bad)
    assert code != 0
    plan = tmp_path / 'plan'
    code, plan_output = runner.run('plan.yml', EXAMPLE, '-e', 'fleet_plan_dir=%s' % plan, *bad)
    assert code != 0
    assert_no_contact(plan_output)
    assert fail_messages(validate_output) and fail_messages(plan_output) == fail_messages(validate_output)
    assert 'host gpu-01: vllm_server_max_num_batched_tokens=500 is below N=784' in fail_messages(plan_output)[0]
    assert 'host gpu-03: vllm_server_max_num_batched_tokens=500 is below N=544' in fail_messages(plan_output)[0]
    assert not plan.exists()


def test_problems_with_the_predicted_n_all_at_once(runner, monkeypatch, tmp_path):
    """Without vllm_server_expected_block_size, the predicted N is checked with deploy's rules; every problem is listed."""
    monkeypatch.delenv('HF_HUB_CACHE', raising=False)
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'empty-hf'))
    plan = tmp_path / 'plan'
    code, output = runner.run('plan.yml', PLAN_INVENTORY, '--limit', 'plan-27b,plan-expected', '-e', 'fleet_plan_dir=%s' % plan,
                              '-e', 'lmcache_server_chunk_size=1000', '-e', '{"vllm_server_expected_block_size": null}')
    assert code != 0
    assert_no_contact(output)
    messages = re.findall(r'"msg": "(\d+ problem\(s\) with the predicted N[^"]*)"', output)
    assert messages, output[-6000:]
    text = messages[0]
    assert text.startswith('2 problem(s) with the predicted N, nothing was planned')
    assert 'host plan-27b: lmcache_server_chunk_size=1000 is not a multiple of N=784; use 784 or 1568' in text
    assert 'host plan-expected: model Example/Not-On-This-Machine: config.json not found on the control node' in text
    assert str(tmp_path / 'empty-hf' / 'hub' / 'models--Example--Not-On-This-Machine') in text
    assert not plan.exists()


def test_identical_hosts_form_one_probe_group(runner, hf_env, tmp_path):
    """Hosts with the same inputs of N share one probe group; another TP is another group."""
    same = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_api_key': 'k'}
    inventory = runner.write_inventory({'a-1': same, 'a-2': same, 'b-1': dict(same, vllm_server_tensor_parallel_size=2),
                                        'a-3': dict(same, vllm_server_port=8001)})
    plan = tmp_path / 'plan'
    code, output = runner.run('plan.yml', inventory, '-e', 'fleet_plan_dir=%s' % plan)
    assert code == 0, output[-6000:]
    assert_no_contact(output)
    assert 'probe group G1: 3 host(s), probed on a-1, taken by a-2, a-3' in output
    assert 'probe group G2: 1 host(s), probed on b-1' in output
    markdown = read(str(plan / 'fleet.md'))
    assert '| G1 | 3 | a-1 | a-2, a-3 |' in markdown and '| G2 | 1 | b-1 | - |' in markdown


def test_check_mode_writes_nothing(runner, hf_env, tmp_path):
    plan = tmp_path / 'plan'
    code, output = runner.run('plan.yml', EXAMPLE, '--check', '-e', 'fleet_plan_dir=%s' % plan)
    assert code == 0, output[-6000:]
    assert not plan.exists()
    assert 'gpu-01' in output and 'changed: [' in output
