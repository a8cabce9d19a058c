# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy.yml compares each probed N with the N predicted from config.json: a mismatch is warned
with both values and the inputs of the prediction, the probe wins, the summary shows both.

tests/playbooks/deploy_probed_n.yml runs deploy.yml's own stage-3 and summary task files against the
example inventory, with the probed N given as an extra variable instead of a probe; the model
configurations come from a fake Hugging Face cache (tests/fixtures/models). No host is contacted.
"""

from __future__ import annotations

import json
import os
import re

from fleet_playbook_helpers import EXAMPLE, REPO_ROOT, assert_no_contact

PLAYBOOK = os.path.join(REPO_ROOT, 'tests', 'playbooks', 'deploy_probed_n.yml')
PREDICTED = {'gpu-01': 784, 'gpu-02': 1568, 'gpu-03': 544}
NO_EXPECTED = '{"vllm_server_expected_block_size": null}'
GPU03_MISMATCH = (
    'host gpu-03: the probed N=560 differs from the predicted N=544 (prediction inputs: '
    'architecture=Qwen3_5ForConditionalGeneration, tensor_parallel_size=1, dtype=auto, kv_cache_dtype=auto, '
    'mamba_ssm_cache_dtype=auto, mamba_cache_dtype=auto, block_size=null, num_speculative_tokens=0, platform=cuda, '
    'vllm_version=0.32.0, config=Qwen/Qwen3.5-0.8B, model_dtype=bfloat16, conv_dtype=bfloat16, ssm_dtype=float32); '
    'the probe wins: N=560 is deployed')


def run(runner, probed, *extra):
    code, output = runner.run(PLAYBOOK, EXAMPLE, '-e', 'ansible_ssh_executable=/nonexistent/ssh',
                              '-e', json.dumps({'test_probed_n': probed}), *extra)
    assert_no_contact(output)
    return code, output


def summary_rows(output):
    """{host: [cells]} from the per-host summary (after the 'N (source)' header)."""
    rows = {}
    for line in re.findall(r'^\s+"((?:gpu-\d+)\s.*)",?$', output, flags=re.MULTILINE):
        cells = line.split()
        rows[cells[0]] = cells
    return rows


def test_probe_agrees_with_prediction_no_warning(runner, hf_env):
    code, output = run(runner, PREDICTED)
    assert code == 0, output[-6000:]
    assert 'differs from the predicted N' not in output
    assert re.search(r'host\s+model\s+TP\s+N \(source\)\s+predicted\s+chunk', output), output[-3000:]
    rows = summary_rows(output)
    for host, n in PREDICTED.items():
        # host model TP N (source) predicted ...
        assert rows[host][3:6] == [str(n), '(probe)', str(n)], rows[host]


def test_probe_disagrees_warning_with_both_values_and_inputs(runner, hf_env):
    code, output = run(runner, dict(PREDICTED, **{'gpu-03': 560}), '-e', NO_EXPECTED)
    assert code == 0, output[-6000:]
    assert GPU03_MISMATCH in output
    assert output.count('differs from the predicted N') == 1   # gpu-01 and gpu-02 agree
    rows = summary_rows(output)
    # the probe wins: chunk size and max-num-batched-tokens follow the probed N
    assert rows['gpu-03'][3:8] == ['560', '(probe)', '544', '560', '1119'], rows['gpu-03']


def test_probe_disagrees_with_expected_block_size_fails_before_any_service(runner, hf_env):
    code, output = run(runner, dict(PREDICTED, **{'gpu-03': 560}))
    assert code != 0
    assert GPU03_MISMATCH in output
    messages = re.findall(r'"msg": "(\d+ problem\(s\) with the probed N[^"]*)"', output)
    assert messages, output[-6000:]
    assert messages[0] == ('1 problem(s) with the probed N, no service was changed: host gpu-03: '
                           'vllm_server_expected_block_size=544 does not match the probed N=560; use 560 (or null)')


def test_no_prediction_is_never_fatal(runner, monkeypatch, tmp_path):
    """Without the model's config.json on the control node the deploy goes on; the summary shows "-"."""
    monkeypatch.delenv('HF_HUB_CACHE', raising=False)
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'empty-hf'))
    code, output = run(runner, dict(PREDICTED, **{'gpu-03': 560}), '-e', NO_EXPECTED)
    assert code == 0, output[-6000:]
    assert 'differs from the predicted N' not in output
    rows = summary_rows(output)
    assert rows['gpu-03'][3:6] == ['560', '(probe)', '-'], rows['gpu-03']
    assert rows['gpu-01'][3:6] == ['784', '(probe)', '-'], rows['gpu-01']
