# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/report/rollout_findings.py and its filter: which findings explain a failed
rollout (the deploy's rescue, playbooks/tasks/rollback.yml), from journal lines LMCache and vLLM print."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter.diagnose import rollout_findings as rollout_filter
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report.rollout_findings import rollout_findings

PLAN = {'n_inputs': {'platform': 'cpu', 'model': 'Qwen/Qwen3.5-0.8B'},
        'lmcache': {'service_name': 'lmcache-server'},
        'vllm': {'service_name': 'vllm', 'hf_home': '/var/lib/vllm/hf', 'home': '/var/lib/vllm', 'venv': '/opt/vllm/venv'}}
SHM = ("[2026-11-30 12:20:22,391] LMCache ERROR: Error handling operation register_kv_cache (mq.py:798)\n"
       "PermissionError: [Errno 13] Permission denied: '/lmcache_kv_1333_0'\n")
NO_RESPONSE = ("(Worker pid=28993) ERROR 11-30 10:45:20 ConnectionError: LMCache server did not respond to "
               "register_kv_caches within 300.0s. Is the server running?\n")
DISK_FULL = "OSError: [Errno 28] No space left on device: '/var/lib/vllm/hf/hub'\n"


def causes(findings):
    return [f['cause'] for f in findings]


def test_lmcache_names_the_cause_so_vllms_no_response_adds_nothing():
    found = rollout_findings(SHM, NO_RESPONSE, 'gpu-01', 'vllm', PLAN, 'Wait for vLLM', 'timed out')
    assert causes(found) == ['shm_permission']
    assert found[0]['message'].startswith('host gpu-01: ')
    # without LMCache's cause, vLLM's own finding stays and comes first in its stage
    assert causes(rollout_findings('', NO_RESPONSE, 'gpu-01', 'vllm', PLAN)) == ['lmcache_no_response']


def test_the_failed_stage_comes_first_and_a_full_disk_names_the_vllm_path():
    found = rollout_findings(SHM, DISK_FULL, 'gpu-01', 'lmcache', PLAN)
    assert causes(found)[0] == 'shm_permission' and len(found) == 2
    assert 'vllm_server_hf_home' in found[1]['message']
    assert causes(rollout_findings(SHM, DISK_FULL, 'gpu-01', 'vllm', PLAN))[0] == causes(found)[1]


def test_no_cause_in_either_journal_names_the_task_and_the_last_error():
    found = rollout_findings('', 'RuntimeError: something new\n', 'gpu-01', 'vllm', PLAN,
                             'Wait for vLLM to answer', '  timed out after 900 s \n')
    assert causes(found) == ['task']
    assert found[0]['message'] == ('host gpu-01: Wait for vLLM to answer failed: timed out after 900 s '
                                   '(last journal error: RuntimeError: something new)')
    assert rollout_findings('', '', 'gpu-01', 'vllm', PLAN)[0]['message'] == 'host gpu-01: a task failed: '


def test_the_filter_checks_its_input():
    assert causes(rollout_filter([SHM, ''], 'gpu-01', 'lmcache', PLAN)) == ['shm_permission']
    with pytest.raises(AnsibleFilterError, match='LMCache journal, the vLLM journal'):
        rollout_filter(SHM, 'gpu-01', 'lmcache', PLAN)
    with pytest.raises(AnsibleFilterError, match='host plan'):
        rollout_filter([SHM, ''], 'gpu-01', 'lmcache', None)


def test_a_host_that_failed_before_its_services_changed():
    from ansible_collections.lmcache_vllm.fleet.plugins.filter.diagnose import stage_findings
    probe = {'msg': 'vLLM exited before it printed N', 'log_tail': DISK_FULL, 'stderr': ''}
    found = stage_findings(probe, 'gpu-01', PLAN, 'Probe N')
    assert causes(found) == ['disk_full'] and found[0]['message'].startswith('host gpu-01: ')
    assert stage_findings({'msg': ' no such package vllm==9 \n'}, 'gpu-01', PLAN, 'Install vLLM') == [
        {'cause': 'unknown', 'message': 'host gpu-01: Install vLLM failed: no such package vllm==9'}]
    assert causes(stage_findings(None, 'gpu-01', PLAN)) == ['unknown']
    with pytest.raises(AnsibleFilterError, match='host plan'):
        stage_findings({}, 'gpu-01', None)
