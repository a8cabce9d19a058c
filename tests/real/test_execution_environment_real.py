# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment of execution-environment.yml, built for real and run.

scripts/build-ee.sh builds it with the real ansible-builder and podman on the project's own base image
(scripts/setup-ee-base.sh: Debian packages, no container registry). Then the image runs the collection:
ansible-galaxy lists this checkout's version, ansible-doc renders a module as the checkout does, ansible-playbook
syntax-checks the deploy playbook, and ansible-navigator runs validate.yml from the image against the first-fleet
inventory: as it is it passes, with a bad variable it is refused with the host and variable named.

Slow: a podman build (two to three minutes cold on 2 cores, base image included; about 10 s warm from podman's
layer cache, about 30 s after a change to the collection). Without root, podman or the tools it skips, unless CI or
FLEET_REQUIRE_REAL=1 asks for the real parts."""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from fleet_real_probe_helpers import REPO, skip_or_fail

# podman's default limits are higher than this machine's runtime grants (as in scripts/build-ee.sh)
ULIMITS = ['--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=32768:32768']
ANSI = re.compile(r'\x1b\[[0-9;]*[A-Za-z]|\x1b\][^\x07]*\x07')


def galaxy_version():
    with open(os.path.join(REPO, 'galaxy.yml'), encoding='utf-8') as handle:
        return str(yaml.safe_load(handle)['version'])


def tool(name):
    found = os.path.join(os.path.dirname(sys.executable), name)
    if not os.access(found, os.X_OK):
        skip_or_fail('%s is missing (scripts/setup-tools.sh, requirements/tools.txt)' % name)
    return found


def run(argv, **kwargs):
    kwargs.setdefault('timeout', 300)
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)


def clean_env():
    """This machine's environment less the ANSIBLE_* settings of scripts/env.sh (the image has its own)."""
    return {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}


@pytest.fixture(name='image', scope='module')
def image_fixture():
    if os.geteuid() != 0 or not shutil.which('podman'):
        skip_or_fail('building the execution environment needs root and podman (scripts/setup-testhosts.sh)')
    tool('ansible-builder')
    tag = 'localhost/lmcache-vllm-fleet-ee:%s' % galaxy_version()
    started = time.monotonic()
    proc = run(['bash', os.path.join(REPO, 'scripts', 'build-ee.sh'), tag], timeout=1800)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    print('execution environment %s built in %.0f s' % (tag, time.monotonic() - started))
    return tag


def in_image(image, *argv):
    return run(['podman', 'run', '--rm'] + ULIMITS + [image] + list(argv))


def test_the_image_holds_this_version_of_the_collection(image):
    proc = in_image(image, 'ansible-galaxy', 'collection', 'list', '--format', 'json', 'lmcache_vllm.fleet')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = json.loads(proc.stdout)
    assert listed == {'/usr/share/ansible/collections/ansible_collections':
                      {'lmcache_vllm.fleet': {'version': galaxy_version()}}}


def test_ansible_doc_in_the_image_renders_the_module_as_the_checkout_does(image):
    name = 'lmcache_vllm.fleet.block_size_probe'
    proc = in_image(image, 'ansible-doc', '--json', name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    inside = json.loads(proc.stdout)[name]['doc']
    proc = run([tool('ansible-doc'), '--json', name], cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    here = json.loads(proc.stdout)[name]['doc']
    for key in ('short_description', 'description', 'options', 'version_added', 'attributes'):
        assert inside.get(key) == here.get(key), key
    assert inside['options'], 'the module documents no option'


def test_the_deploy_playbook_passes_the_syntax_check_in_the_image(image):
    proc = in_image(image, 'ansible-playbook', '--syntax-check', '-i', 'localhost,', 'lmcache_vllm.fleet.deploy')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'ansible_collections/lmcache_vllm/fleet/playbooks/deploy.yml' in proc.stdout


def navigator_validate(image, work, hosts):
    """ansible-navigator runs lmcache_vllm.fleet.validate from the image against an inventory in WORK."""
    inventory = work / 'inventory'
    inventory.mkdir()
    (inventory / 'hosts.yml').write_text(yaml.safe_dump(hosts))
    argv = [tool('ansible-navigator'), 'run', 'lmcache_vllm.fleet.validate', '-i', str(inventory),
            '--mode', 'stdout', '--ee', 'true', '--ce', 'podman', '--eei', image, '--pull-policy', 'never',
            '--playbook-artifact-enable', 'false', '--log-file', str(work / 'navigator.log')]
    argv += ['--container-options=%s' % '='.join(ULIMITS[i:i + 2]) for i in range(0, len(ULIMITS), 2)]
    proc = run(argv, cwd=str(work), env=clean_env())
    return proc.returncode, ANSI.sub('', proc.stdout + proc.stderr)


def first_fleet():
    with open(os.path.join(REPO, 'inventories', 'first-fleet', 'hosts.yml'), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def test_ansible_navigator_validates_a_fleet_from_the_image(image, tmp_path):
    rc, out = navigator_validate(image, tmp_path, first_fleet())
    assert rc == 0, out[-6000:]
    for host in first_fleet()['all']['children']['vllm_hosts']['hosts']:
        assert re.search(r'^%s\s*:\s*ok=\d+ .*failed=0' % host, out, re.M), out[-6000:]


def test_ansible_navigator_refuses_a_bad_variable_from_the_image(image, tmp_path):
    hosts = first_fleet()
    hosts['all']['children']['vllm_hosts']['vars']['vllm_server_gpu_memory_utilization'] = 1.7
    rc, out = navigator_validate(image, tmp_path, hosts)
    assert rc != 0, out[-6000:]
    assert re.search(r'host gpu-01: vllm_server_gpu_memory_utilization=1\.7', out), out[-6000:]
