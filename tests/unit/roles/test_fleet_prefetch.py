# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/vllm_server/files/fleet_prefetch.py: the disk check, the offline path and what is downloaded.

The hub cannot be reached from the test machines: ``HubDouble`` is a test double of the
huggingface_hub module (its snapshot_download dry run and download), named as such.
"""

from __future__ import annotations

import collections
import json

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan

Entry = collections.namedtuple('Entry', 'filename file_size is_cached')
GIB = 1024 ** 3


class HubDouble:
    """Test double of huggingface_hub: a repository of files, some already cached."""

    def __init__(self, files, offline_ok=True):
        self.files = files
        self.offline_ok = offline_ok
        self.downloads = []

    def snapshot_download(self, repo, revision=None, allow_patterns=None, dry_run=False, local_files_only=False):
        assert allow_patterns and '*.safetensors' in allow_patterns
        if dry_run:
            return [Entry(name, size, cached) for name, (size, cached) in self.files.items()]
        if local_files_only:
            if not self.offline_ok:
                raise FileNotFoundError('model.safetensors is not in the cache')
            return '/cache/snapshot'
        self.downloads.append((repo, revision))
        return '/cache/snapshot'


@pytest.fixture(name='prefetch')
def prefetch_fixture(repo_script):
    return repo_script('roles/vllm_server/files/fleet_prefetch.py')


def test_downloads_what_is_missing_when_it_fits(prefetch, tmp_path):
    hub = HubDouble({'config.json': (2000, True), 'model.safetensors': (1024, False)})
    result = prefetch.prefetch(hub, 'Qwen/Qwen3.5-0.8B', None, 0, str(tmp_path / 'not-yet' / 'hf'), False)
    assert result['changed'] is True and result['download_bytes'] == 1024 and hub.downloads == [('Qwen/Qwen3.5-0.8B', None)]


def test_nothing_to_do_when_everything_is_cached(prefetch, tmp_path):
    hub = HubDouble({'config.json': (2000, True), 'model.safetensors': (10 * GIB, True)})
    result = prefetch.prefetch(hub, 'Qwen/Qwen3.5-0.8B', 'main', 5, str(tmp_path), False)
    assert result['changed'] is False and result['download_bytes'] == 0 and hub.downloads == []


def test_refuses_when_the_disk_is_too_small(prefetch, tmp_path):
    hub = HubDouble({'model-00001.safetensors': (10 ** 15, False)})
    result = prefetch.prefetch(hub, 'Qwen/Qwen3.6-27B', None, 5, str(tmp_path), False)
    assert result['failed'] is True and hub.downloads == []
    assert result['msg'].startswith('Qwen/Qwen3.6-27B: the model needs 931322.6 GiB more (plus a margin of 5.0 GiB) but the '
                                    'disk of HF_HOME has ')
    assert result['msg'].endswith('GiB free; free space there or set vllm_server_hf_home to a larger disk')


def test_offline_host_only_checks_the_cache(prefetch, tmp_path):
    assert prefetch.prefetch(HubDouble({}), 'Qwen/Qwen3.5-0.8B', None, 5, str(tmp_path), True)['changed'] is False
    missing = prefetch.prefetch(HubDouble({}, offline_ok=False), 'Qwen/Qwen3.5-0.8B', None, 5, str(tmp_path), True)
    assert missing['failed'] is True
    assert missing['msg'].startswith('the host is offline (HF_HUB_OFFLINE=1) and Qwen/Qwen3.5-0.8B is not complete in ')


def test_main_reports_json_and_status(prefetch, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv('HF_HOME', str(tmp_path))
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    monkeypatch.setitem(__import__('sys').modules, 'huggingface_hub', HubDouble({}, offline_ok=False))
    assert prefetch.main(['Qwen/Qwen3.5-0.8B', '', '5']) == 2
    assert json.loads(capsys.readouterr().out)['failed'] is True


def test_the_plan_prefetches_hub_models_only():
    hub = host_plan.plan_host('gpu-01', {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_prefetch_model': True},
                              n=544, n_kind='probed')['vllm']
    assert hub['prefetch'] is True and hub['prefetch_helper'] == hub['venv'] + '/bin/fleet-prefetch'
    local = host_plan.plan_host('gpu-01', {'vllm_server_model': '/srv/models/x', 'vllm_server_prefetch_model': True},
                                n=544, n_kind='probed')['vllm']
    assert local['prefetch'] is False
    off = host_plan.plan_host('gpu-01', {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'}, n=544, n_kind='probed')['vllm']
    assert off['prefetch'] is False
