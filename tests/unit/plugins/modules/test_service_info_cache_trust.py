# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""service_info reads the probe cache under the probe's own trust checks: a cache file others may write, a link
to a forged file, or a cache in a directory others may change never puts its N into the status report."""

from __future__ import annotations

import json
import os

from ansible_collections.lmcache_vllm.fleet.plugins.modules import service_info

FORGED = json.dumps({'f' * 64: {'vllm_block_size': 1}})


def test_a_trusted_cache_is_read(tmp_path):
    cache = tmp_path / 'facts.d' / 'vllm_block_size.fact'
    cache.parent.mkdir()
    cache.write_text(FORGED)
    os.chmod(str(cache), 0o644)
    assert service_info.read_probe_cache(str(cache)) == FORGED
    assert service_info.read_probe_cache(str(tmp_path / 'facts.d' / 'absent.fact')) is None


def test_a_world_writable_cache_is_not_read(tmp_path):
    cache = tmp_path / 'vllm_block_size.fact'
    cache.write_text(FORGED)
    os.chmod(str(cache), 0o666)
    warnings = []
    assert service_info.read_probe_cache(str(cache), warnings.append) is None
    assert 'writable by group/other' in warnings[0]


def test_a_linked_cache_is_not_read(tmp_path):
    forged = tmp_path / 'forged.json'
    forged.write_text(FORGED)
    os.symlink(str(forged), str(tmp_path / 'vllm_block_size.fact'))
    assert service_info.read_probe_cache(str(tmp_path / 'vllm_block_size.fact')) is None


def test_a_cache_in_a_directory_others_may_change_is_not_read(tmp_path):
    shared = tmp_path / 'shared'
    shared.mkdir()
    os.chmod(str(shared), 0o777)
    (shared / 'vllm_block_size.fact').write_text(FORGED)
    assert service_info.read_probe_cache(str(shared / 'vllm_block_size.fact')) is None
