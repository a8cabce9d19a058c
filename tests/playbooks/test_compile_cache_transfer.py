# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warm first start: the compile caches of a group's first started host reach another host's HOME through the
control node, only when both keys are equal (tests/playbooks/compile_cache_transfer.yml, both hosts local,
sharing the unit's HOME path as a group's hosts do)."""

from __future__ import annotations

import base64
import getpass
import grp
import json
import os
import re
import tarfile

import yaml

from fleet_playbook_helpers import REPO_ROOT

PLAYBOOK = os.path.join(REPO_ROOT, 'tests', 'playbooks', 'compile_cache_transfer.yml')
INPUTS = {'vllm_version': '0.32.0', 'model': {'kind': 'hub', 'id': 'Qwen/Qwen3.5-0.8B', 'revision': 'main'},
          'hardware': {'kind': 'cuda', 'driver_version': '580.159.04',
                       'gpus': [{'name': 'NVIDIA H200', 'compute_cap': '9.0', 'architecture': 'sm90'}]}}


def run(runner, tmp_path, dst_inputs, dst_home='home', **extra_vars):
    user, group = getpass.getuser(), grp.getgrgid(os.getgid()).gr_name
    hosts = {}
    for name, home in (('src', 'home'), ('dst', dst_home)):
        hosts[name] = {'ansible_connection': 'local', 'ansible_python_interpreter': '{{ ansible_playbook_python }}',
                       'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_home': str(tmp_path / home),
                       'vllm_server_user': user, 'vllm_server_group': group}
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text(yaml.safe_dump({'all': {'hosts': hosts}}))
    extra = tmp_path / 'extra.json'
    extra.write_text(json.dumps({'test_probe_inputs': {'src': INPUTS, 'dst': dst_inputs},
                                 'fleet_compile_cache_dir': str(tmp_path / 'control'), **extra_vars}))
    code, output = runner.run(PLAYBOOK, str(inventory), '-e', '@%s' % extra)
    assert code == 0, output[-6000:]
    results = [json.loads(base64.b64decode(m)) for m in re.findall(r'FLEET-CC-RESULT ([A-Za-z0-9+/=]+)', output)]
    return {r['host']: r for r in results}


def make_caches(home):
    triton = home / '.triton' / 'cache' / 'abc'
    triton.mkdir(parents=True)
    (triton / 'kernel.cubin').write_bytes(b'\x7fELF' + b'k' * 4096)
    compiled = home / 'cache' / 'torch_compile_cache' / 'deadbeef' / 'rank_0_0'
    compiled.mkdir(parents=True)
    (compiled / 'computation_graph.py').write_text('graph = 1\n')
    (home / 'huggingface').mkdir()
    (home / 'huggingface' / 'weights.bin').write_text('not a cache')


def test_equal_keys_copy_the_caches_and_report_size_and_time(runner, tmp_path):
    home = tmp_path / 'home'
    make_caches(home)
    got = run(runner, tmp_path, INPUTS)
    packed = got['src']['packed']
    assert packed['path'].startswith(str(tmp_path / 'control')) and int(packed['size']) > 0
    with tarfile.open(packed['path']) as tar:
        names = tar.getnames()
    assert '.triton/cache/abc/kernel.cubin' in names and not [n for n in names if 'huggingface' in n]  # only the caches travel
    assert got['src']['key'] == got['dst']['key']
    assert re.match(r'host dst: compile caches of src, [0-9.]+ MiB in [0-9.]+ s through the control node$', got['dst']['seeded'])
    assert (home / '.triton' / 'cache' / 'abc' / 'kernel.cubin').read_bytes() == b'\x7fELF' + b'k' * 4096
    assert (home / 'cache' / 'torch_compile_cache' / 'deadbeef' / 'rank_0_0' / 'computation_graph.py').exists()


def test_a_key_that_differs_copies_nothing_and_says_why(runner, tmp_path):
    make_caches(tmp_path / 'home')
    other = dict(INPUTS, vllm_version='0.33.0')
    got = run(runner, tmp_path, other)
    assert got['dst']['seeded'].startswith('host dst: the compile caches of src are not copied, their key differs: vllm_version')
    assert not (tmp_path / 'home' / '.triton' / 'cache').exists()


def test_another_home_path_copies_nothing(runner, tmp_path):
    # vLLM recompiles caches unpacked under another HOME path (docs/gpu.md): the key refuses the copy.
    make_caches(tmp_path / 'home')
    got = run(runner, tmp_path, INPUTS, dst_home='elsewhere')
    assert 'their key differs: home (' in got['dst']['seeded'] and got['src']['key'] != got['dst']['key']
    assert not (tmp_path / 'elsewhere').exists()
