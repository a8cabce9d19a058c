# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/filter/mamba.py and plugins/filter/readback.py and their documentation files."""

from __future__ import annotations

import json
import os

import yaml

from ansible_collections.lmcache_vllm.fleet.plugins.filter import mamba, readback
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import explain_block_size

UNIT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO_ROOT = os.path.dirname(os.path.dirname(UNIT_DIR))
FILTER_DIR = os.path.join(REPO_ROOT, 'plugins', 'filter')
MODEL = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen3.6-27b')


def _config():
    with open(os.path.join(MODEL, 'config.json')) as handle:
        return json.load(handle)


def test_every_filter_has_its_documentation():
    for module in (mamba, readback):
        for name in module.FilterModule().filters():
            with open(os.path.join(FILTER_DIR, name + '.yml')) as handle:
                doc = yaml.safe_load(handle)
            assert doc['DOCUMENTATION']['name'] == name


def test_predicted_mamba_blocks_from_gpu_facts_and_from_the_table():
    cfg = _config()
    pred = explain_block_size(cfg, platform='cuda')
    facts = {'gpus': [{'index': 0, 'name': 'NVIDIA H200', 'memory_total_mib': 143771}]}
    by_facts = mamba.predicted_mamba_blocks(cfg, pred, gpus=facts, gpu_memory_utilization=0.6, model_dir=MODEL)
    by_table = mamba.predicted_mamba_blocks(cfg, pred, gpu_architecture='NVIDIA H200', gpu_memory_utilization=0.6)
    assert by_facts['mamba_cache_blocks'] == by_table['mamba_cache_blocks'] > 0
    assert by_facts['gpu_memory_source'] == 'gpu facts'


def test_predicted_mamba_blocks_never_fails():
    cfg = _config()
    pred = explain_block_size(cfg, platform='cuda')
    unknown = mamba.predicted_mamba_blocks(cfg, pred, gpu_architecture='sm90')
    assert unknown['mamba_cache_blocks'] is None and 'gpu_architecture' in unknown['problem']
    broken = mamba.predicted_mamba_blocks({'architectures': ['Qwen3_5ForCausalLM']}, pred, gpu_architecture='NVIDIA H200')
    assert broken['mamba_cache_blocks'] is None and broken['problem'].startswith('cannot predict')


def test_readback_filters():
    metric = 'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="9"} 1.0\n'
    journal = ['INFO 12-01 09:54:39 [interface.py:773] Setting attention block size to 544 tokens to ensure that attention '
               'page size is >= mamba page size.',
               'INFO 12-01 09:54:40 [kv_cache_utils.py:1300] GPU KV cache size: 4,896 tokens']
    live = readback.vllm_block_size_readback(metric, journal=journal, platform='cuda')
    assert (live['n'], live['source'], live['num_gpu_blocks']) == (544, 'journal', 9)
    assert readback.vllm_block_size_drift(live, host='h', probed_n=544, unit_n=544) == []
    assert 'host h:' in readback.vllm_block_size_drift(live, host='h', probed_n=640)[0]
