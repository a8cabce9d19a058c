# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plan_tree: the one-pass fleet plan's pure logic (prediction once per model, checks, records, writes)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_tree
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import explain_block_size
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.host_plan import plan_host, public_view

from fleet_collection import REPO_ROOT

MODEL_DIR = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen3.5-0.8b')


def load_config(term, revision='main', paths=None):
    """Reads a config.json from a directory, like the model_config lookup does for a local directory."""
    path = os.path.join(term, 'config.json')
    if not os.path.isfile(path):
        raise LookupError('model %s: config.json not found on the control node' % term)
    with open(path, encoding='utf-8') as handle:
        return json.load(handle)


class CountingReader:
    def __init__(self):
        self.calls = []

    def __call__(self, term, revision='main', paths=None):
        self.calls.append(term)
        return load_config(term, revision, paths)


def test_each_model_is_read_once_for_the_whole_fleet():
    read = CountingReader()
    reader = plan_tree.ConfigReader(read)
    plans = [plan_host('h%d' % i, {'vllm_server_model': MODEL_DIR}) for i in range(5)]
    results = [plan_tree.predict(p['host'], p['n_inputs'], None, reader, []) for p in plans]
    assert read.calls == [MODEL_DIR]
    expected = explain_block_size(load_config(MODEL_DIR), platform='cuda')
    for prediction, problem in results:
        assert problem is None and dict((k, prediction[k]) for k in expected) == expected
        # CUDA without a GPU name or gpu facts: no GPU memory, so neither the fit nor M is known (said, not guessed)
        assert prediction['memory'] == {'fits': None, 'problem': prediction['mamba']['problem']}
        assert prediction['mamba']['mamba_cache_blocks'] is None


def test_a_missing_model_is_a_sentence_naming_the_host_and_is_looked_up_once():
    read = CountingReader()
    reader = plan_tree.ConfigReader(read)
    plan = plan_host('gpu-07', {'vllm_server_model': '/nowhere/model'})
    for attempt in range(3):
        prediction, problem = plan_tree.predict('gpu-07', plan['n_inputs'], None, reader, [])
        assert prediction is None, attempt
        assert problem == 'host gpu-07: model /nowhere/model: config.json not found on the control node'
    assert read.calls == ['/nowhere/model']


def test_an_inline_configuration_is_not_read_and_follows_the_host_inputs():
    read = CountingReader()
    reader = plan_tree.ConfigReader(read)
    config = load_config(MODEL_DIR)
    tp1 = plan_host('a', {'vllm_server_model': 'x/y'})
    fp8 = plan_host('b', {'vllm_server_model': 'x/y', 'vllm_server_kv_cache_dtype': 'fp8'})
    n1 = plan_tree.predict('a', tp1['n_inputs'], config, reader, [])[0]['block_size']
    n2 = plan_tree.predict('b', fp8['n_inputs'], config, reader, [])[0]['block_size']
    assert read.calls == []
    assert n1 == explain_block_size(config, platform='cuda')['block_size']
    assert n2 == explain_block_size(config, platform='cuda', kv_cache_dtype='fp8')['block_size']


def test_a_configuration_that_cannot_be_predicted_says_so():
    plan = plan_host('h', {'vllm_server_model': 'x/y'})
    prediction, problem = plan_tree.predict('h', plan['n_inputs'], {'architectures': ['NoSuchArch']},
                                            plan_tree.ConfigReader(load_config), [])
    assert prediction is None and problem.startswith('host h: cannot predict the block size: ')


def test_check_lists_every_problem_in_validate_words():
    good = plan_host('ok', {'vllm_server_model': 'x/y'})
    bad1 = plan_host('b1', {'vllm_server_model': 'x/y', 'vllm_server_port': 'eighty'})
    bad2 = plan_host('b2', {'vllm_server_model': 'x/y', 'lmcache_server_port': 70000})
    errors, _warnings, message = plan_tree.check([good, bad1, bad2], 'in the inventory')
    assert errors == bad1['errors'] + bad2['errors'] and len(errors) >= 2
    assert message == '%d problem(s) in the inventory, nothing was changed: %s' % (len(errors), ' | '.join(errors))
    assert plan_tree.check([good], 'in the inventory')[2] is None


def test_record_and_row_carry_the_prediction():
    config = load_config(MODEL_DIR)
    static = plan_host('h', {'vllm_server_model': 'x/y'})
    prediction = plan_tree.predict('h', static['n_inputs'], config, plan_tree.ConfigReader(load_config), [])[0]
    public = public_view(plan_host('h', {'vllm_server_model': 'x/y'}, n=prediction['block_size'], n_kind='predicted',
                                   prediction=prediction))
    record = plan_tree.record(public, prediction, None)
    assert record['block_size'] == prediction['block_size'] and record['block_size_source'] == 'predicted'
    row = fleet_report.plan_row(public, prediction)
    assert row['gpu_kind'] == '%s (%s)' % (prediction['assumed_architecture'], prediction['architecture_source'])
    assert row['ssm_dtype'] == prediction['ssm_dtype'] and row['n'] == prediction['block_size']
    unknown = fleet_report.plan_row(public, None)
    assert unknown['gpu_kind'] == '?' and unknown['conv_dtype'] == '-'
    lines = fleet_report.plan_lines([row], '/plans')
    assert lines[1].split()[:2] == ['h', 'x/y'] and lines[-1].startswith('plan written to /plans ')


def test_write_file_writes_only_what_differs(tmp_path):
    path = str(tmp_path / 'h' / 'etc' / 'unit')
    made = set()
    assert plan_tree.write_file(path, 'a\n', '0600', made) is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert plan_tree.write_file(path, 'a\n', '0600', made) is False
    os.chmod(path, 0o644)
    assert plan_tree.write_file(path, 'a\n', '0600', made) is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert plan_tree.write_file(path, 'b\n', '0600', made) is True
    with open(path, encoding='utf-8') as handle:
        assert handle.read() == 'b\n'
    assert sorted(os.listdir(os.path.dirname(path))) == ['unit']


@pytest.mark.parametrize('dest,expected', [('/etc/x', '/p/h/etc/x'), ('', '/p/h')])
def test_host_path(dest, expected):
    assert plan_tree.host_path('/p', 'h', dest) == expected


def test_check_mode_writes_nothing_and_says_what_would_change(tmp_path):
    path = str(tmp_path / 'h' / 'unit')
    assert plan_tree.write_file(path, 'a\n', '0644', set(), check=True) is True
    assert not os.path.exists(os.path.dirname(path))
    plan_tree.write_file(path, 'a\n', '0644')
    assert plan_tree.write_file(path, 'a\n', '0644', check=True) is False
    assert plan_tree.write_file(path, 'b\n', '0644', check=True) is True
    with open(path, encoding='utf-8') as handle:
        assert handle.read() == 'a\n'
