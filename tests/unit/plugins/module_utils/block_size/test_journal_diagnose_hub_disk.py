# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The journal explainer on a gated model, an unreachable or disabled model hub, a full disk, and the fallback's
unit name. The journals are shaped as vLLM's start-up failures print them (huggingface_hub and requests
tracebacks); the hub's address is a mirror (HF_ENDPOINT) here."""

from __future__ import annotations

import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.filter.diagnose import journal_diagnose
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_variables
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.journal_diagnose import (
    DEFAULT_UNITS, diagnose, path_variable)

HOST = 'gpu-07'
LOGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), 'fixtures', 'logs')


def journal(name):
    with open(os.path.join(LOGS, name), encoding='utf-8') as handle:
        return handle.read()


GATED = journal('journal-gated-model.log')

HUB_UNREACHABLE = journal('journal-hub-unreachable.log')

HUB_UNREACHABLE_NO_HOST = journal('journal-hub-unreachable-no-address.log')

OFFLINE = journal('journal-hub-offline.log')

DISK_FULL = journal('journal-disk-full-hf-cache.log')

COMPILE_CACHE_FULL = journal('journal-disk-full-compile-cache.log')

DISK_FULL_NO_PATH = journal('journal-disk-full-no-path.log')


def only(findings, cause):
    assert [f['cause'] for f in findings] == [cause], findings
    return findings[0]


def test_gated_model_names_the_token_variable():
    finding = only(diagnose(GATED, host=HOST, model='meta-llama/Llama-3.1-8B-Instruct'), 'gated_model')
    assert finding['variables'] == ['vllm_server_hf_token']
    assert finding['message'] == (
        'host gpu-07: the model hub refused meta-llama/Llama-3.1-8B-Instruct: the model is gated and the service has '
        "no token with access to it (401/403); set vllm_server_hf_token to a Hugging Face token of an account that "
        "accepted the model's terms (it goes to the unit's 0600 environment file only), or point vllm_server_model at "
        'a local copy of the model')
    assert finding['evidence'].startswith('(APIServer pid=2211) Cannot access gated repo')


def test_gated_model_without_the_url_names_the_configured_model():
    finding = only(diagnose('huggingface_hub.errors.GatedRepoError: 401 Client Error.', model='org/m'), 'gated_model')
    assert 'refused org/m:' in finding['what']


def test_a_missing_repository_is_not_called_gated():
    text = ("huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-x)\n"
            "Repository Not Found for url: https://hub.mirror.internal/Qwen/Qwen3.6-27X/resolve/main/config.json.")
    assert [f['cause'] for f in diagnose(text)] == ['model_not_found']


def test_unreachable_hub_names_the_proxy_offline_mode_and_prefetch():
    finding = only(diagnose(HUB_UNREACHABLE, host=HOST, model='Qwen/Qwen3.6-27B'), 'hub_unreachable')
    assert finding['what'] == ("vLLM could not reach the model hub at hub.mirror.internal to fetch Qwen/Qwen3.6-27B, and "
                               "the model is not in the service's Hugging Face cache")
    for words in ('a proxy in vllm_server_env', 'HTTPS_PROXY', 'HF_HUB_OFFLINE=1', 'vllm_server_prefetch_model=true'):
        assert words in finding['fix'], words
    assert finding['variables'] == ['vllm_server_env', 'vllm_server_prefetch_model']


def test_unreachable_hub_without_an_address():
    finding = only(diagnose(HUB_UNREACHABLE_NO_HOST, model='Qwen/Qwen3.5-0.8B'), 'hub_unreachable')
    assert finding['what'].startswith('vLLM could not reach the model hub to fetch Qwen/Qwen3.5-0.8B,')


def test_offline_host_without_the_model_names_prefetch():
    finding = only(diagnose(OFFLINE, host=HOST, model='Qwen/Qwen3.5-0.8B'), 'hub_offline_not_cached')
    assert 'HF_HUB_OFFLINE=1 in vllm_server_env' in finding['what']
    assert finding['variables'] == ['vllm_server_prefetch_model', 'vllm_server_env']


def test_full_disk_names_the_path_and_the_variable_that_moves_it():
    paths = {'vllm_server_hf_home': '/srv/hf', 'vllm_server_home': '/var/lib/vllm', 'vllm_server_venv': '/opt/vllm'}
    finding = only(journal_diagnose(DISK_FULL, 'vllm', HOST, 'cuda', 'Qwen/Qwen3.6-27B', paths=paths), 'disk_full')
    path = '/srv/hf/hub/models--Qwen--Qwen3.6-27B/blobs/5f0c1d2e3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d.incomplete'
    assert finding['what'] == 'the disk holding %s is full (No space left on device)' % path
    assert finding['fix'] == ('free space there (df -h /srv/hf/hub/models--Qwen--Qwen3.6-27B/blobs), or move it to a '
                              'larger disk with vllm_server_hf_home')
    assert finding['variables'] == ['vllm_server_hf_home']


def test_full_disk_in_the_compile_cache_names_the_home():
    finding = only(diagnose(COMPILE_CACHE_FULL, paths={'vllm_server_hf_home': '/var/lib/vllm/huggingface',
                                                       'vllm_server_home': '/var/lib/vllm'}), 'disk_full')
    assert finding['variables'] == ['vllm_server_home']


def test_full_disk_without_a_path():
    finding = only(diagnose(DISK_FULL_NO_PATH, service='vllm'), 'disk_full')
    assert finding['variables'] == ['vllm_server_hf_home', 'vllm_server_home']
    assert 'df -h' in finding['fix']


@pytest.mark.parametrize('path, service, paths, expected', [
    ('/var/lib/vllm/huggingface/hub/x', 'vllm', None, 'vllm_server_hf_home'),
    ('/var/lib/lmcache/log/x', 'lmcache', None, 'lmcache_server_home'),
    ('/opt/vllm/vllm-0.32.0/lib/x', 'vllm', {'vllm_server_venv': '/opt/vllm/vllm-0.32.0', 'vllm_server_home': '/opt'},
     'vllm_server_venv'),
    ('/data/models-cache/x', 'vllm', {'vllm_server_hf_home': '/data/models'}, 'vllm_server_home'),
])
def test_path_variable(path, service, paths, expected):
    assert path_variable(path, service, paths) == expected


def test_fallback_names_the_unit():
    findings = diagnose('RuntimeError: something new broke', service='vllm', host=HOST, unit='vllm-qwen')
    assert findings[0]['fix'] == 'read the unit journal (journalctl -u vllm-qwen.service) for the full error'
    findings = diagnose('', service='lmcache', host=HOST)
    assert findings[0]['fix'] == ('read the unit journal (journalctl -u lmcache-server.service) and systemctl status '
                                  'lmcache-server.service')
    assert all('<unit>' not in f['message'] for f in findings)


def test_default_units_are_the_roles_defaults():
    defaults = plan_variables.role_defaults()
    assert DEFAULT_UNITS == {'vllm': defaults['vllm_server_service_name'],
                             'lmcache': defaults['lmcache_server_service_name']}
