# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/lookup/model_config.py (fake Hugging Face cache trees in tmp_path)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible.errors import AnsibleLookupError
from ansible import constants as C

from ansible_collections.lmcache_vllm.fleet.plugins.lookup import model_config
from ansible_collections.lmcache_vllm.fleet.plugins.lookup.model_config import LookupModule, find_model_config, hub_cache_dirs, read_model_config
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import predict_block_size

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODELS = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models')
COMMIT = '0123456789abcdef0123456789abcdef01234567'
PLUGIN = 'lmcache_vllm.fleet.model_config'
OTHER = 'fedcba9876543210fedcba9876543210fedcba98'


def fixture_config(name):
    with open(os.path.join(MODELS, name, 'config.json'), encoding='utf-8') as handle:
        return json.load(handle)


def make_cache(hub, model, config, commit=COMMIT, ref='main'):
    """A Hugging Face hub cache entry: models--Org--Name/{refs/<ref>, snapshots/<commit>/config.json}."""
    repo = hub / ('models--' + model.replace('/', '--'))
    snapshot = repo / 'snapshots' / commit
    snapshot.mkdir(parents=True)
    (snapshot / 'config.json').write_text(json.dumps(config), encoding='utf-8')
    if ref:
        (repo / 'refs').mkdir(exist_ok=True)
        (repo / 'refs' / ref).write_text(commit + '\n', encoding='utf-8')
    return snapshot / 'config.json'


@pytest.fixture(name='clean_env')
def clean_env_fixture(monkeypatch, tmp_path):
    for name in ('HF_HOME', 'HF_HUB_CACHE', 'XDG_CACHE_HOME'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    return monkeypatch


def run_lookup(terms, **kwargs):
    """Run the lookup with its documented options, as the plugin loader would."""
    options = yaml.safe_load(model_config.DOCUMENTATION)['options']
    C.config.initialize_plugin_configuration_definitions('lookup', PLUGIN, options)
    plugin = LookupModule()
    plugin._load_name = PLUGIN  # pylint: disable=protected-access
    return plugin.run(terms, variables={}, **kwargs)


def test_documentation_is_yaml():
    for block in (model_config.DOCUMENTATION, model_config.EXAMPLES, model_config.RETURN):
        assert yaml.safe_load(block)
    doc = yaml.safe_load(model_config.DOCUMENTATION)
    assert doc['name'] == 'model_config'
    assert doc['author'] == 'lmcache_vllm.fleet maintainers (@lmcache-vllm)'


def test_hub_cache_dir_precedence(tmp_path):
    assert hub_cache_dirs(environ={'HOME': '/h'})[0].endswith(os.path.join('.cache', 'huggingface', 'hub'))
    assert hub_cache_dirs(environ={'XDG_CACHE_HOME': '/x'}) == ['/x/huggingface/hub']
    assert hub_cache_dirs(environ={'HF_HOME': '/hf', 'XDG_CACHE_HOME': '/x'}) == ['/hf/hub']
    assert hub_cache_dirs(environ={'HF_HOME': '/hf', 'HF_HUB_CACHE': '/hc'}) == ['/hc']
    assert hub_cache_dirs(cache_dir=str(tmp_path), environ={'HF_HUB_CACHE': '/hc'}) == [str(tmp_path)]


def test_local_directory_and_file():
    directory = os.path.join(MODELS, 'qwen3.6-27b')
    assert run_lookup([directory]) == [fixture_config('qwen3.6-27b')]
    assert run_lookup([os.path.join(directory, 'config.json')]) == [fixture_config('qwen3.6-27b')]


def test_hf_home_refs_main(clean_env, tmp_path):
    make_cache(tmp_path / 'hf' / 'hub', 'Qwen/Qwen3.6-27B', fixture_config('qwen3.6-27b'))
    clean_env.setenv('HF_HOME', str(tmp_path / 'hf'))
    config = run_lookup(['Qwen/Qwen3.6-27B'])[0]
    assert predict_block_size(config, tensor_parallel_size=2) == 784


def test_hf_hub_cache_wins_over_hf_home(clean_env, tmp_path):
    make_cache(tmp_path / 'hf' / 'hub', 'Qwen/Qwen3.5-0.8B', {'architectures': ['wrong']})
    make_cache(tmp_path / 'hubcache', 'Qwen/Qwen3.5-0.8B', fixture_config('qwen3.5-0.8b'))
    clean_env.setenv('HF_HOME', str(tmp_path / 'hf'))
    clean_env.setenv('HF_HUB_CACHE', str(tmp_path / 'hubcache'))
    assert predict_block_size(run_lookup(['Qwen/Qwen3.5-0.8B'])[0]) == 544


def test_default_cache_under_home(clean_env, tmp_path):
    make_cache(tmp_path / 'home' / '.cache' / 'huggingface' / 'hub', 'Qwen/Qwen3.5-0.8B', fixture_config('qwen3.5-0.8b'))
    assert run_lookup(['Qwen/Qwen3.5-0.8B']) == [fixture_config('qwen3.5-0.8b')]


def test_cache_dir_option_and_revisions(clean_env, tmp_path):
    hub = tmp_path / 'hub'
    make_cache(hub, 'Org/Model', {'architectures': ['A'], 'which': 'main'})
    make_cache(hub, 'Org/Model', {'architectures': ['A'], 'which': 'tag'}, commit=OTHER, ref='v1')
    assert run_lookup(['Org/Model'], cache_dir=str(hub))[0]['which'] == 'main'
    assert run_lookup(['Org/Model'], cache_dir=str(hub), revision='v1')[0]['which'] == 'tag'
    assert run_lookup(['Org/Model'], cache_dir=str(hub), revision=OTHER)[0]['which'] == 'tag'


def test_paths_option(clean_env, tmp_path):
    (tmp_path / 'models' / 'Qwen3.6-27B').mkdir(parents=True)
    (tmp_path / 'models' / 'Qwen3.6-27B' / 'config.json').write_text(json.dumps({'architectures': ['X']}), encoding='utf-8')
    assert run_lookup(['Qwen/Qwen3.6-27B'], paths=[str(tmp_path / 'models')]) == [{'architectures': ['X']}]


def test_several_terms(clean_env, tmp_path):
    make_cache(tmp_path / 'hub', 'A/One', {'architectures': ['One']})
    make_cache(tmp_path / 'hub', 'A/Two', {'architectures': ['Two']})
    result = run_lookup(['A/One', 'A/Two'], cache_dir=str(tmp_path / 'hub'))
    assert [item['architectures'][0] for item in result] == ['One', 'Two']


def test_not_found_names_model_and_places(clean_env, tmp_path):
    clean_env.setenv('HF_HOME', str(tmp_path / 'hf'))
    with pytest.raises(AnsibleLookupError) as info:
        run_lookup(['Qwen/Qwen3.6-27B'], paths=[str(tmp_path / 'models')])
    text = str(info.value)
    assert text.startswith('model Qwen/Qwen3.6-27B: config.json not found on the control node')
    assert str(tmp_path / 'hf' / 'hub' / 'models--Qwen--Qwen3.6-27B') in text
    assert str(tmp_path / 'models' / 'Qwen3.6-27B' / 'config.json') in text
    assert 'vllm_server_model_config' in text


def test_missing_ref_and_missing_snapshot(clean_env, tmp_path):
    hub = tmp_path / 'hub'
    make_cache(hub, 'Org/Model', {'architectures': ['A']}, ref=None)
    with pytest.raises(LookupError, match=r'refs/main \(no such ref\)'):
        find_model_config('Org/Model', cache_dir=str(hub))
    (hub / 'models--Org--Model' / 'refs').mkdir()
    (hub / 'models--Org--Model' / 'refs' / 'main').write_text(OTHER, encoding='utf-8')
    with pytest.raises(LookupError, match=OTHER):
        find_model_config('Org/Model', cache_dir=str(hub))


def test_directory_without_config(tmp_path):
    with pytest.raises(LookupError, match='has no config.json'):
        find_model_config(str(tmp_path))


def test_absolute_path_missing(tmp_path):
    with pytest.raises(LookupError, match='no such file or directory'):
        find_model_config(str(tmp_path / 'nowhere'))


def test_bad_json(tmp_path):
    (tmp_path / 'config.json').write_text('{not json', encoding='utf-8')
    with pytest.raises(LookupError, match='cannot read'):
        read_model_config(str(tmp_path))
    (tmp_path / 'config.json').write_text('[1, 2]', encoding='utf-8')
    with pytest.raises(LookupError, match='not a JSON object'):
        read_model_config(str(tmp_path))


@pytest.mark.parametrize('model', ['', '  ', None])
def test_empty_model(model):
    with pytest.raises(LookupError, match='needs a model'):
        find_model_config(model)
