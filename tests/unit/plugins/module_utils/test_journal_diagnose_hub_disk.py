# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The journal explainer on a gated model, an unreachable or disabled model hub, a full disk, and the fallback's
unit name. The journals are shaped as vLLM's start-up failures print them (huggingface_hub and requests
tracebacks); the hub's address is a mirror (HF_ENDPOINT) here."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.filter.diagnose import journal_diagnose
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.journal_diagnose import (
    DEFAULT_UNITS, diagnose, path_variable)

HOST = 'gpu-07'

GATED = """\
(APIServer pid=2211) INFO 11-30 09:12:01 [utils.py:253] non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', 'port': 8000}
(APIServer pid=2211) Traceback (most recent call last):
(APIServer pid=2211)   File "/opt/vllm/vllm-0.32.0/lib/python3.12/site-packages/huggingface_hub/utils/_http.py", line 409, in hf_raise_for_status
(APIServer pid=2211)     response.raise_for_status()
(APIServer pid=2211) requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://hub.mirror.internal/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json
(APIServer pid=2211) The above exception was the direct cause of the following exception:
(APIServer pid=2211) huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-674b0c51-0d5e3a3b1c2d4e5f6a7b8c9d;7f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b)
(APIServer pid=2211) Cannot access gated repo for url https://hub.mirror.internal/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json.
(APIServer pid=2211) Access to model meta-llama/Llama-3.1-8B-Instruct is restricted. You must have access to it and be authenticated to access it. Please log in.
vllm.service: Main process exited, code=exited, status=1/FAILURE
"""

HUB_UNREACHABLE = """\
(APIServer pid=3301) requests.exceptions.ConnectionError: (MaxRetryError("HTTPSConnectionPool(host='hub.mirror.internal', port=443): Max retries exceeded with url: /Qwen/Qwen3.6-27B/resolve/main/config.json (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a2c1b9d50>: Failed to establish a new connection: [Errno 101] Network is unreachable'))"), '(Request ID: 5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e)')
(APIServer pid=3301) huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache. Please check your connection and try again or make sure your Internet connection is on.
(APIServer pid=3301) OSError: We couldn't connect to 'https://hub.mirror.internal' to load the files, and couldn't find them in the cached files.
vllm.service: Failed with result 'exit-code'.
"""

HUB_UNREACHABLE_NO_HOST = """\
(APIServer pid=3302) huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the files on the Hub and we cannot find the requested files in the local cache. Please check your connection and try again or make sure your Internet connection is on.
"""

OFFLINE = """\
(APIServer pid=3410) huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.
"""

DISK_FULL = """\
(APIServer pid=4120) INFO 11-30 10:02:44 [weight_utils.py:270] Using model weights format ['*.safetensors']
(APIServer pid=4120) Traceback (most recent call last):
(APIServer pid=4120)   File "/opt/vllm/vllm-0.32.0/lib/python3.12/site-packages/huggingface_hub/file_download.py", line 1730, in _download_to_tmp_and_move
(APIServer pid=4120)     http_get(
(APIServer pid=4120) OSError: [Errno 28] No space left on device: '/srv/hf/hub/models--Qwen--Qwen3.6-27B/blobs/5f0c1d2e3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d.incomplete'
vllm.service: Main process exited, code=exited, status=1/FAILURE
"""

COMPILE_CACHE_FULL = """\
(EngineCore pid=4301) OSError: [Errno 28] No space left on device: '/var/lib/vllm/.cache/vllm/torch_compile_cache/3b1f2a/rank_0_0/inductor_cache/fx_graph.bin'
"""

DISK_FULL_NO_PATH = """\
(EngineCore pid=4302) RuntimeError: [enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file data/17: file write failed
(EngineCore pid=4302) OSError: [Errno 28] No space left on device
"""


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
    defaults = host_plan.role_defaults()
    assert DEFAULT_UNITS == {'vllm': defaults['vllm_server_service_name'],
                             'lmcache': defaults['lmcache_server_service_name']}
