# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/block_size/journal_diagnose.py and the journal_diagnose filter."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.journal_diagnose import diagnose, last_error_line, summary
from ansible_collections.lmcache_vllm.fleet.plugins.filter.diagnose import journal_diagnose

HOST = 'gpu-01'

# Journal excerpts as vLLM 0.32 / LMCache 0.5.6 print them (journalctl -o cat).
CASES = [
    (
        'mamba_cache_blocks',
        '(EngineCore pid=812) ERROR 11-30 10:00:01 [core.py:1010] ValueError: max_num_seqs (256) exceeds available '
        'Mamba cache blocks (41). Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot '
        'proceed. Please lower max_num_seqs to at most 41 or increase gpu_memory_utilization.',
        'vllm', 'cuda',
        ['lower vllm_server_max_num_seqs to at most 41 or raise vllm_server_gpu_memory_utilization', 'max_num_seqs (256)'],
    ),
    (
        'model_not_found',
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
        "'namespace/repo_name': '/srv/models/nope'. Use `repo_type` argument if needed.",
        'vllm', 'cpu',
        ['/srv/models/nope', 'vllm_server_model'],
    ),
    (
        'model_not_found',
        "ValueError: Invalid repository ID or local directory specified: '/models/missing'.",
        'vllm', 'cuda',
        ['/models/missing', 'set vllm_server_model'],
    ),
    (
        'chunk_size_multiple',
        '(EngineCore pid=1) ERROR ValueError: LMCache chunk size 1000 must be a multiple of group 0 tokens_per_block 784',
        'vllm', 'cuda',
        ['1000 is not a multiple of vLLM block size 784', 'lmcache_server_chunk_size', 'multiple of 784'],
    ),
    (
        'max_num_batched_tokens_lmcache',
        'ValueError: Mamba-hybrid models with LMCache require max_num_batched_tokens >= block_size so every prefill step '
        'advances at least one full block; got max_num_batched_tokens=512, block_size=784. Set --max-num-batched-tokens '
        'to at least 784.',
        'vllm', 'cuda',
        ['vllm_server_max_num_batched_tokens to at least 784', '1567'],
    ),
    (
        'max_num_batched_tokens_vllm',
        'AssertionError: In Mamba cache align mode, block_size (2096) must be <= max_num_batched_tokens (2048).',
        'vllm', 'cuda',
        ['vllm_server_max_num_batched_tokens to at least 2096', '4191'],
    ),
    (
        'lmcache_no_response',
        "(Worker pid=28993) ERROR 11-30 10:45:20 ConnectionError: LMCache server did not respond to register_kv_caches "
        "within 300.0s. Is the server running?",
        'vllm', 'cpu',
        ['lmcache_server_supported_transfer_mode', 'vllm_server_lmcache_transfer_mode', 'transfer mode'],
    ),
    (
        'lmcache_no_handler',
        'LMCache ERROR: No handler registered for operation register_kv_cache_engine_driven_context (mq.py:800:...)',
        'lmcache', 'cpu',
        ['lmcache_server_supported_transfer_mode=auto', 'register_kv_cache_engine_driven_context'],
    ),
    (
        'cpu_hybrid_connector',
        "(Worker pid=19295) ERROR ValueError: engine-driven transfer does not support multiple KV transfer groups now",
        'vllm', 'cpu',
        ['vllm_server_kv_connector=false', 'hybrid'],
    ),
    (
        'cpu_hybrid_connector',
        'ValueError: migrate_to_shm_and_wrap requires a contiguous tensor',
        'vllm', 'cpu',
        ['vllm_server_kv_connector=false'],
    ),
    (
        'shm_permission',
        "[2026-11-30 12:20:22,391] LMCache ERROR: Error handling operation register_kv_cache (mq.py:798)\n"
        "PermissionError: [Errno 13] Permission denied: '/lmcache_kv_1333_0'",
        'lmcache', 'cpu',
        ['/lmcache_kv_1333_0', 'set lmcache_server_user and lmcache_server_group to vllm_server_user'],
    ),
    (
        'cpu_memory_check',
        'ValueError: Available memory on node 0 (8.83/10.21 GiB) on startup is less than desired CPU memory utilization '
        '(0.92, 9.4 GiB). On the CPU backend, the `--gpu-memory-utilization` flag controls the fraction of CPU memory',
        'vllm', 'cpu',
        ['vllm_server_gpu_memory_utilization', 'vllm_server_cpu_kvcache_space_gb', '8.83'],
    ),
    (
        'port_in_use',
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): address already in use",
        'vllm', 'cuda',
        ['change vllm_server_port'],
    ),
    (
        'port_in_use',
        'zmq.error.ZMQError: Address already in use (addr=\'tcp://127.0.0.1:5555\')',
        'lmcache', 'cuda',
        ['lmcache_server_port'],
    ),
    (
        'lmcache_unreachable',
        "Cannot reach the LMCache MP server at 'tcp://127.0.0.1:5555' within 300.0s.",
        'vllm', 'cuda',
        ['tcp://127.0.0.1:5555', 'vllm_server_lmcache_port'],
    ),
    (
        'mamba_cache_mode',
        "ValueError: LMCache cannot serve this model's KV cache groups: group 0: MambaSpec with mamba_cache_mode='all' "
        "(only 'align' keeps reusable state snapshots).",
        'vllm', 'cuda',
        ['vllm_server_mamba_cache_mode=align'],
    ),
    (
        'max_model_len',
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n  Value error, User-specified "
        "max_model_len (1000000) is greater than the derived max_model_len (max_position_embeddings=262144 or "
        "model_max_length=None in model's config.json).",
        'vllm', 'cpu',
        ['vllm_server_max_model_len to at most 262144'],
    ),
    (
        'tp_heads',
        'ValueError: Total number of attention heads (24) must be divisible by tensor parallel size (5).',
        'vllm', 'cuda',
        ['vllm_server_tensor_parallel_size', 'divisor of 24'],
    ),
    (
        'bad_arguments',
        'vllm serve: error: unrecognized arguments: --no-such-flag',
        'vllm', 'cuda',
        ['vllm_server_extra_args', '--no-such-flag'],
    ),
    (
        'exec_missing',
        'vllm.service: Main process exited, code=exited, status=203/EXEC',
        'vllm', 'cuda',
        ['vllm_server_venv'],
    ),
]


@pytest.mark.parametrize('cause,text,service,device,expected', CASES)
def test_known_causes(cause, text, service, device, expected):
    findings = diagnose('some noise\n' + text + '\nmore noise', service=service, host=HOST, device=device)
    assert findings[0]['cause'] == cause, findings
    message = findings[0]['message']
    assert message.startswith('host %s: ' % HOST)
    for part in expected:
        assert part in message, (part, message)
    assert findings[0]['evidence'] in text


def test_mamba_blocks_on_cpu_names_the_kv_cache_space():
    text = 'ValueError: max_num_seqs (64) exceeds available Mamba cache blocks (9).'
    message = diagnose(text, device='cpu')[0]['message']
    assert 'lower vllm_server_max_num_seqs to at most 9 or raise vllm_server_cpu_kvcache_space_gb' in message


def test_transfer_mode_mismatch_drops_the_unreachable_follow_up():
    text = ('ConnectionError: LMCache server did not respond to register_kv_caches within 10.0s. Is the server running?\n'
            "Cannot reach the LMCache MP server at 'tcp://127.0.0.1:5555' within 10.0s.")
    causes = [f['cause'] for f in diagnose(text)]
    assert causes == ['lmcache_no_response']


def test_ansi_codes_are_ignored():
    text = '\x1b[1;31mERROR\x1b[0m ValueError: max_num_seqs (8) exceeds available Mamba cache blocks (2).'
    assert diagnose(text)[0]['cause'] == 'mamba_cache_blocks'


def test_unknown_failure_falls_back_to_the_last_error_line():
    text = 'INFO starting\nTraceback (most recent call last):\n  File "x.py"\nRuntimeError: something odd happened\nINFO bye'
    findings = diagnose(text, host=HOST)
    assert findings[0]['cause'] == 'unknown'
    assert 'RuntimeError: something odd happened' in findings[0]['message']


def test_empty_journal():
    findings = diagnose('', host=HOST)
    assert findings[0]['cause'] == 'unknown'
    assert 'without a message' in findings[0]['message']


def test_several_causes_are_all_reported():
    text = ('LMCache chunk size 1000 must be a multiple of group 0 tokens_per_block 784\n'
            "[Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use")
    causes = [f['cause'] for f in diagnose(text)]
    assert causes == ['chunk_size_multiple', 'port_in_use']


def test_last_error_line():
    assert last_error_line('a\nValueError: x\nb') == 'ValueError: x'
    assert last_error_line('a\nb') == 'b'
    assert last_error_line('') == ''


def test_summary_joins_messages():
    findings = diagnose('ValueError: max_num_seqs (8) exceeds available Mamba cache blocks (2).', host=HOST)
    assert summary(findings) == findings[0]['message']


def test_filter_accepts_lines():
    findings = journal_diagnose(['x', 'ValueError: max_num_seqs (8) exceeds available Mamba cache blocks (2).'],
                                'vllm', HOST)
    assert findings[0]['cause'] == 'mamba_cache_blocks'
    assert journal_diagnose(None)[0]['cause'] == 'unknown'
