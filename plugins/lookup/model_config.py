# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: model_config
author: lmcache_vllm.fleet maintainers (@lmcache-vllm)
version_added: "0.1.0"
short_description: Read a model's config.json on the control node
description:
  - Returns the parsed C(config.json) of each model given, read on the control node only (no download, no connection).
  - A term is a local model directory, the path of a C(config.json) file, or a Hugging Face hub id such as C(Qwen/Qwen3.6-27B).
  - A hub id is looked up in each directory of O(paths) (as C(<path>/<hub id>) and C(<path>/<model name>)), then in the local
    Hugging Face cache C(<hub cache>/models--<Org>--<Name>/snapshots/<commit>/config.json), where the commit is the content of
    C(refs/<revision>) (or O(revision) itself when it is a commit hash).
  - The hub cache is O(cache_dir), else C($HF_HUB_CACHE), else C($HF_HOME/hub), else C(~/.cache/huggingface/hub).
  - When the model is not found the lookup fails with the model and every place it looked.
  - The result feeds the P(lmcache_vllm.fleet.predicted_block_size#filter) filter.
options:
  _terms:
    description: Models (local directories, config.json paths or hub ids).
    type: list
    elements: str
    required: true
  revision:
    description:
      - Branch, tag or commit of a hub id in the Hugging Face cache.
      - A branch or tag is resolved through C(refs/<revision>); a 40 hex digit commit names the snapshot directly.
    type: str
    default: main
  cache_dir:
    description: Hugging Face hub cache directory (the one holding C(models--*) directories); overrides the environment.
    type: path
  paths:
    description: Extra directories holding model directories, searched before the hub cache.
    type: list
    elements: path
    default: []
"""

EXAMPLES = r"""
- name: Read the configuration of the host's model from the local Hugging Face cache
  ansible.builtin.set_fact:
    model_config: "{{ lookup('lmcache_vllm.fleet.model_config', vllm_server_model) }}"

- name: Predict N from a local model directory
  ansible.builtin.debug:
    msg: "{{ lookup('lmcache_vllm.fleet.model_config', '/srv/models/Qwen3.6-27B') | lmcache_vllm.fleet.predicted_block_size(tensor_parallel_size=2) }}"

- name: A pinned revision, a given cache and a directory of local models
  ansible.builtin.debug:
    msg: >-
      {{ lookup('lmcache_vllm.fleet.model_config', 'Qwen/Qwen3.5-0.8B', revision='v1.0',
                cache_dir='/data/hf/hub', paths=['/srv/models']) }}
"""

RETURN = r"""
_raw:
  description: The parsed config.json of each term, in order (a single mapping for a single term with C(lookup)).
  type: list
  elements: dict
"""

import json
import os
import re

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

COMMIT_RE = re.compile(r'^[0-9a-f]{40}$')
CONFIG_NAME = 'config.json'


def hub_cache_dirs(cache_dir=None, environ=None):
    """The Hugging Face hub cache directory to read, as a one-element list (empty when none applies)."""
    environ = os.environ if environ is None else environ
    if cache_dir:
        return [os.path.expanduser(cache_dir)]
    if environ.get('HF_HUB_CACHE'):
        return [os.path.expanduser(environ['HF_HUB_CACHE'])]
    if environ.get('HF_HOME'):
        return [os.path.join(os.path.expanduser(environ['HF_HOME']), 'hub')]
    xdg = environ.get('XDG_CACHE_HOME')
    base = os.path.expanduser(xdg) if xdg else os.path.join(os.path.expanduser('~'), '.cache')
    return [os.path.join(base, 'huggingface', 'hub')]


def _snapshot_config(repo_dir, revision, looked):
    refs_file = os.path.join(repo_dir, 'refs', revision)
    if os.path.isfile(refs_file):
        with open(refs_file, encoding='utf-8') as handle:
            commit = handle.read().strip()
        candidate = os.path.join(repo_dir, 'snapshots', commit, CONFIG_NAME)
        looked.append('%s (%s -> %s)' % (candidate, os.path.join('refs', revision), commit))
        if os.path.isfile(candidate):
            return candidate
        return None
    if COMMIT_RE.match(revision):
        candidate = os.path.join(repo_dir, 'snapshots', revision, CONFIG_NAME)
        looked.append(candidate)
        if os.path.isfile(candidate):
            return candidate
        return None
    looked.append('%s (no such ref)' % refs_file)
    return None


def find_model_config(model, revision='main', cache_dir=None, paths=None, environ=None):
    """Path of the config.json of ``model``; raises LookupError naming every place looked."""
    if not isinstance(model, str) or not model.strip():
        raise LookupError('model_config needs a model (a local directory, a config.json path or a hub id), got %r' % (model,))
    model = model.strip()
    revision = (revision or 'main').strip()
    looked = []
    expanded = os.path.expanduser(model)
    if os.path.isfile(expanded):
        return expanded
    if os.path.isdir(expanded):
        candidate = os.path.join(expanded, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
        raise LookupError('model %s: the directory %s has no %s' % (model, expanded, CONFIG_NAME))
    looked.append('%s (no such local path)' % os.path.abspath(expanded))
    if os.path.isabs(expanded) or model.startswith('.'):
        raise LookupError('model %s: no such file or directory (%s)' % (model, expanded))

    for base in paths or []:
        base = os.path.expanduser(base)
        for name in dict.fromkeys((model, model.rsplit('/', 1)[-1])):
            candidate = os.path.join(base, name, CONFIG_NAME)
            looked.append(candidate)
            if os.path.isfile(candidate):
                return candidate

    repo_name = 'models--' + model.replace('/', '--')
    for hub in hub_cache_dirs(cache_dir, environ):
        repo_dir = os.path.join(hub, repo_name)
        if not os.path.isdir(repo_dir):
            looked.append('%s (not in the Hugging Face cache)' % repo_dir)
            continue
        found = _snapshot_config(repo_dir, revision, looked)
        if found:
            return found
    raise LookupError('model %s: config.json not found on the control node; looked in: %s. Download it there '
                      '(e.g. hf download %s config.json), or set vllm_server_model_config to its config.json, '
                      'its directory or the configuration itself' % (model, '; '.join(looked), model))


def read_model_config(model, revision='main', cache_dir=None, paths=None, environ=None):
    """The parsed config.json of ``model`` (see :func:`find_model_config`)."""
    path = find_model_config(model, revision=revision, cache_dir=cache_dir, paths=paths, environ=environ)
    try:
        with open(path, encoding='utf-8') as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise LookupError('model %s: cannot read %s: %s' % (model, path, exc)) from exc
    if not isinstance(config, dict):
        raise LookupError('model %s: %s is not a JSON object' % (model, path))
    return config


class LookupModule(LookupBase):
    """Read config.json of local models or models in the local Hugging Face cache."""

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        revision = self.get_option('revision')
        cache_dir = self.get_option('cache_dir')
        paths = self.get_option('paths') or []
        results = []
        for term in terms:
            try:
                results.append(read_model_config(term, revision=revision, cache_dir=cache_dir, paths=paths))
            except LookupError as exc:
                raise AnsibleLookupError(str(exc)) from exc
        return results
