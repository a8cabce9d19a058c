# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the playbook tests (the helpers live in ``fleet_playbook_helpers``)."""

from __future__ import annotations

import pytest

from fleet_playbook_helpers import PlaybookRunner, fake_hf_home  # first: puts tests/ on sys.path
from fleet_collection import collections_tree  # noqa: E402  # pylint: disable=wrong-import-order


@pytest.fixture(scope='session')
def collections_path(tmp_path_factory):
    return collections_tree(tmp_path_factory.mktemp('collections'))


@pytest.fixture
def runner(collections_path, tmp_path):
    return PlaybookRunner(collections_path, tmp_path)


@pytest.fixture(name='hf_env')
def hf_env_fixture(monkeypatch, tmp_path):
    """A Hugging Face cache holding the example models' config.json, and the example inventory's secrets."""
    monkeypatch.delenv('HF_HUB_CACHE', raising=False)
    monkeypatch.setenv('HF_HOME', fake_hf_home(tmp_path / 'hf'))
    monkeypatch.setenv('FLEET_VLLM_API_KEY', 'secret-api-key-value')
    monkeypatch.setenv('FLEET_KV_STORE_PASSWORD', 'secret-kv-store-password')
    monkeypatch.setenv('HF_TOKEN', 'hf_secret_token_value')
    return monkeypatch
