# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy.yml --check --diff previews a first deploy of a new host without failing and without changing it.

The host is this machine (local connection, no become), every path of the roles below a temporary directory, with
no vLLM installed: the preview reads the package versions without the virtualenv check mode would create, probes
nothing, plans with the N predicted from the model's config.json, shows the unit files it would write and starts
nothing. The molecule day2 scenario runs the same preview on a real systemd host before its first deploy.
"""

from __future__ import annotations

import os

from fleet_playbook_helpers import REPO_ROOT
from test_day2 import local_host, write_inventory

MODEL = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen35-tiny')


def test_check_mode_previews_a_first_deploy(runner, tmp_path):
    root = tmp_path / 'host'
    root.mkdir()
    host = local_host(root, vllm_server_model=MODEL, vllm_server_hybrid=True, vllm_server_served_model_name='tiny', vllm_server_kv_connector=False,
                      vllm_server_os_packages=[], lmcache_server_os_packages=[])
    inventory = write_inventory(tmp_path, {'localhost': host})

    code, output = runner.run('deploy.yml', inventory, '-e', 'ansible_become=false', '--check', '--diff')

    assert code == 0, output[-6000:]
    assert ('check mode: N was not probed on localhost (vLLM is not installed yet, or nothing is launched in check '
            'mode); the preview uses the predicted N=640') in output
    assert '+Description=vLLM OpenAI-compatible server (%s, N=640)' % MODEL in output
    assert 'Follow it on localhost with: journalctl -u fleet-test-vllm -f' in output
    assert list(root.iterdir()) == [], 'check mode created %s' % sorted(str(p) for p in root.rglob('*'))
