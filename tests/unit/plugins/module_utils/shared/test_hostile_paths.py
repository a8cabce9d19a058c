# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile input, paths and unit names: every case is refused by the host plan (validation, before any
host is contacted) with the exact sentence (host, variable, fix). The table of system directories is
``ownership.SYSTEM_DIRECTORIES``."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership

HOST = 'gpu-07'
BASE = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'}


def errors(**overrides):
    settings = dict(BASE)
    settings.update(overrides)
    return host_plan.plan_host(HOST, settings, n=544, n_kind='probed')['errors']


SYSTEM = 'is the system directory %s; use a directory of its own such as %s'
INSIDE = 'lies directly inside the system directory %s, whose entries belong to the system; use a directory of its own ' \
         'such as %s'
NORMAL = 'is not written in normal form (no ".", "..", "//" or trailing "/"); write it as %s'

# (id, overrides, the exact sentence)
REFUSED = [
    ('venv-is-usr-bin', {'vllm_server_venv': '/usr/bin'},
     'host gpu-07: vllm_server_venv=/usr/bin ' + SYSTEM % ('/usr/bin', '/opt/vllm/venv')),
    ('venv-is-a-system-binary', {'vllm_server_venv': '/usr/bin/python3'},
     'host gpu-07: vllm_server_venv=/usr/bin/python3 ' + INSIDE % ('/usr/bin', '/opt/vllm/venv')),
    ('venv-is-usr-local', {'lmcache_server_venv': '/usr/local'},
     'host gpu-07: lmcache_server_venv=/usr/local ' + SYSTEM % ('/usr/local', '/opt/lmcache/venv')),
    ('venv-is-srv', {'lmcache_server_venv': '/srv'},
     'host gpu-07: lmcache_server_venv=/srv ' + SYSTEM % ('/srv', '/opt/lmcache/venv')),
    ('home-is-root-dir', {'vllm_server_home': '/'},
     'host gpu-07: vllm_server_home=/ ' + SYSTEM % ('/', '/var/lib/vllm')),
    ('home-is-root-home', {'vllm_server_home': '/root'},
     'host gpu-07: vllm_server_home=/root ' + SYSTEM % ('/root', '/var/lib/vllm')),
    ('home-of-a-person', {'vllm_server_home': '/home/alice'},
     'host gpu-07: vllm_server_home=/home/alice ' + INSIDE % ('/home', '/var/lib/vllm')),
    ('home-is-var-lib', {'lmcache_server_home': '/var/lib'},
     'host gpu-07: lmcache_server_home=/var/lib ' + SYSTEM % ('/var/lib', '/var/lib/lmcache')),
    ('home-in-tmp', {'lmcache_server_home': '/tmp/lmcache'},
     'host gpu-07: lmcache_server_home=/tmp/lmcache ' + INSIDE % ('/tmp', '/var/lib/lmcache')),
    ('venvs-dir-is-opt', {'vllm_server_venvs_dir': '/opt'},
     'host gpu-07: vllm_server_venvs_dir=/opt ' + SYSTEM % ('/opt', '/opt/vllm')),
    ('venvs-dir-trailing-slash', {'vllm_server_venvs_dir': '/opt/vllm/'},
     'host gpu-07: vllm_server_venvs_dir=/opt/vllm/ ' + NORMAL % '/opt/vllm'),
    ('venvs-dir-is-dpkg', {'lmcache_server_venvs_dir': '/var/lib/dpkg'},
     'host gpu-07: lmcache_server_venvs_dir=/var/lib/dpkg ' + SYSTEM % ('/var/lib/dpkg', '/opt/lmcache')),
    ('config-dir-double-slash', {'vllm_server_config_dir': '/etc//lmcache-vllm-fleet'},
     'host gpu-07: vllm_server_config_dir=/etc//lmcache-vllm-fleet ' + NORMAL % '/etc/lmcache-vllm-fleet'),
    ('config-dir-leading-double-slash', {'lmcache_server_config_dir': '//etc/lmcache-vllm-fleet'},
     'host gpu-07: lmcache_server_config_dir=//etc/lmcache-vllm-fleet ' + NORMAL % '/etc/lmcache-vllm-fleet'),
    ('config-dir-is-etc', {'vllm_server_config_dir': '/etc'},
     'host gpu-07: vllm_server_config_dir=/etc ' + SYSTEM % ('/etc', '/etc/lmcache-vllm-fleet')),
    ('config-dir-is-systemds', {'lmcache_server_config_dir': '/etc/systemd/system'},
     'host gpu-07: lmcache_server_config_dir=/etc/systemd/system ' + SYSTEM % ('/etc/systemd/system',
                                                                               '/etc/lmcache-vllm-fleet')),
    ('hf-home-dot-segment', {'vllm_server_hf_home': '/var/lib/vllm/./hf'},
     'host gpu-07: vllm_server_hf_home=/var/lib/vllm/./hf ' + NORMAL % '/var/lib/vllm/hf'),
    ('hf-home-trailing-dot', {'vllm_server_hf_home': '/srv/hf/.'},
     'host gpu-07: vllm_server_hf_home=/srv/hf/. ' + NORMAL % '/srv/hf'),
    ('venvs-dir-dot-to-system', {'vllm_server_venvs_dir': '/opt/.'},
     'host gpu-07: vllm_server_venvs_dir=/opt/. is not written in normal form (no ".", "..", "//" or trailing "/"); '
     'use a path such as /opt/vllm'),
    ('hf-home-in-usr-share', {'vllm_server_hf_home': '/usr/share/huggingface'},
     'host gpu-07: vllm_server_hf_home=/usr/share/huggingface ' + INSIDE % ('/usr/share', '/var/lib/vllm/huggingface')),
    ('backup-dir-is-var-log', {'fleet_backup_dir': '/var/log'},
     'host gpu-07: fleet_backup_dir=/var/log ' + SYSTEM % ('/var/log', '/var/lib/lmcache-vllm-fleet/rollback')),
    ('backup-dir-in-var-log', {'fleet_backup_dir': '/var/log/fleet'},
     'host gpu-07: fleet_backup_dir=/var/log/fleet ' + INSIDE % ('/var/log', '/var/lib/lmcache-vllm-fleet/rollback')),
    ('probe-cache-is-facts-dir', {'fleet_probe_cache_path': '/etc/ansible/facts.d'},
     'host gpu-07: fleet_probe_cache_path=/etc/ansible/facts.d ' + SYSTEM % (
         '/etc/ansible/facts.d', '/etc/ansible/facts.d/vllm_block_size.fact')),
    ('manifest-in-etc-ssh', {'fleet_manifest_path': '/etc/ssh/manifest.json'},
     'host gpu-07: fleet_manifest_path=/etc/ssh/manifest.json ' + INSIDE % (
         '/etc/ssh', '/etc/lmcache-vllm-fleet/manifest.json')),
    ('manifest-relative', {'fleet_manifest_path': 'manifest.json'},
     'host gpu-07: fleet_manifest_path=manifest.json is not an absolute path of plain characters; use an absolute path '
     'of letters, digits and ._+@/- (no spaces, no ..)'),
    # unit names
    ('unit-with-service-suffix', {'vllm_server_service_name': 'vllm.service'},
     'host gpu-07: vllm_server_service_name=vllm.service ends in the unit type suffix .service, so systemctl would act on '
     'the unit vllm.service instead of vllm.service.service; use the name without .service (for example vllm)'),
    ('unit-with-socket-suffix', {'vllm_server_service_name': 'ssh.socket'},
     'host gpu-07: vllm_server_service_name=ssh.socket ends in the unit type suffix .socket, so systemctl would act on '
     'the unit ssh.socket instead of ssh.socket.service; use the name without .socket (for example ssh)'),
    ('unit-with-target-suffix', {'lmcache_server_service_name': 'multi-user.target'},
     'host gpu-07: lmcache_server_service_name=multi-user.target ends in the unit type suffix .target, so systemctl '
     'would act on the unit multi-user.target instead of multi-user.target.service; use the name without .target '
     '(for example multi-user)'),
    ('unit-template-instance', {'vllm_server_service_name': 'getty@tty1'},
     'host gpu-07: vllm_server_service_name=getty@tty1 is a template instance name (it holds "@"); use a plain name '
     'without "@" (for example getty-tty1)'),
    ('unit-template', {'lmcache_server_service_name': 'lmcache@'},
     'host gpu-07: lmcache_server_service_name=lmcache@ is a template instance name (it holds "@"); use a plain name '
     'without "@" (for example lmcache-)'),
]


@pytest.mark.parametrize('overrides, sentence', [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_refused_with_the_exact_sentence(overrides, sentence):
    found = errors(**overrides)
    assert sentence in found, found


def test_many_cases():
    assert len(REFUSED) >= 15


@pytest.mark.parametrize('overrides', [
    {},
    {'vllm_server_venv': '/srv/vllm', 'lmcache_server_venvs_dir': '/srv/lm'},
    {'vllm_server_home': '/var/lib/vllm-a', 'vllm_server_hf_home': '/var/cache/huggingface'},
    {'vllm_server_venvs_dir': '/opt/fleet/venvs', 'fleet_backup_dir': '/var/lib/fleet/rollback'},
    {'fleet_probe_cache_path': '/etc/ansible/facts.d/other.fact', 'vllm_server_service_name': 'vllm-a:b'},
], ids=['defaults', 'srv', 'var-lib-and-cache', 'deeper', 'facts-file'])
def test_legal_paths_and_names_pass(overrides):
    assert errors(**overrides) == []


def test_every_table_entry_is_normal_and_absolute():
    for path, packages_inside in ownership.SYSTEM_DIRECTORIES.items():
        assert ownership.path_problem(path, '/opt/x')[0] == 'is the system directory %s' % path
        child = ownership.path_problem(path.rstrip('/') + '/fleet-x', '/opt/x')
        assert (child is None) == packages_inside, (path, child)


def test_the_defaults_are_outside_the_table():
    for name, example in ownership.PATH_EXAMPLES.items():
        assert ownership.path_problem(example, example) is None, name
