# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/vars/fleet_host.yml (how status and gpus see a host) reads the host plan validate.yml made for the run:
no role variable and no default is written there a second time, and no second plan is computed."""

from __future__ import annotations

import os
import re

import yaml

from fleet_collection import REPO_ROOT


def test_the_host_view_reads_the_plan_only():
    with open(os.path.join(REPO_ROOT, 'playbooks', 'vars', 'fleet_host.yml'), encoding='utf-8') as handle:
        view = yaml.safe_load(handle)
    # validate.yml's plan of this run; the lookup only when validation did not run
    assert view['__fleet_host_plan'].startswith("{{ __fleet_plan if __fleet_plan is defined else lookup('lmcache_vllm.fleet.host_plan'")
    for name, expression in view.items():
        assert not re.search(r'\b(vllm|lmcache)_server_\w+', str(expression)), (name, expression)
        if name not in ('__fleet_host_plan', '__fleet_host_probe_cache', '__fleet_host_backup_dir', '__fleet_host_nvidia_smi'):
            assert '__fleet_host_plan.' in str(expression), name
