# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/vars/fleet_host.yml (how status, remove and monitoring see a host) reads the host plan:
no role variable and no default is written there a second time."""

from __future__ import annotations

import os
import re

import yaml

from fleet_collection import REPO_ROOT


def test_the_host_view_reads_the_plan_only():
    with open(os.path.join(REPO_ROOT, 'playbooks', 'vars', 'fleet_host.yml'), encoding='utf-8') as handle:
        view = yaml.safe_load(handle)
    assert view['__fleet_host_plan'].startswith("{{ lookup('lmcache_vllm.fleet.host_plan'")
    for name, expression in view.items():
        assert not re.search(r'\b(vllm|lmcache)_server_\w+', str(expression)), (name, expression)
        # playbook variables, not the roles': the probe module's cache path, deploy.yml's rollback copies, nvidia-smi
        if name not in ('__fleet_host_plan', '__fleet_host_probe_cache', '__fleet_host_backup_dir', '__fleet_host_nvidia_smi'):
            assert '__fleet_host_plan.' in str(expression), name
