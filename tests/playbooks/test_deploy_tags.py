# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No tag selection of deploy.yml skips the safety of the stages it runs: every selection that changes a host
runs validation and the ownership claims (stage 1b) of the vLLM hosts and of the KV stores, --tags rollout deploys
the KV stores (stage 3b), and a host whose claim did not run (--skip-tags always) is refused before stage 2
installs anything. The listings come from the real ansible-playbook --list-tasks."""

from __future__ import annotations

import re
import sys

import pytest
import yaml

VALIDATE_PLAY = 'Validate the variables of every serving, KV store and router host'
VALIDATE = "Check every host's plan (all problems at once)"
# one task, the action fleet_check, checks every kind of host's plan (serving, KV store, router;
# tests/unit/plugins/action/test_fleet_check_action.py)
VALIDATE_STORES = VALIDATE
CLAIM_HOSTS = 'Check and claim what the deploy creates'
# one task, the action fleet_claim, claims for every kind of host (serving, KV store, router;
# tests/unit/plugins/action/test_fleet_claim_action.py)
CLAIM_STORES = CLAIM_HOSTS
GUARD = 'Refuse a host whose ownership claim (stage 1b) did not run'
CHANGING = ('Install the LMCache server', 'Configure the LMCache server')
STORES = 'Stage 3b, deploy the KV stores'
ROUTERS_PLAY = 'Stage 5, per-host summary, then stage 6, the routers'


def listing(runner, *tags):
    inventory = runner.write_inventory({'gpu-1': {}})
    code, output = runner.run('deploy.yml', inventory, '--list-tasks', *tags)
    assert code == 0, output[-4000:]
    return output


def plays(output):
    """{play name: [task lines]} of an --list-tasks output."""
    found, current = {}, None
    for line in output.splitlines():
        match = re.match(r'\s*play #\d+ \([^)]*\): (.*?)\s+TAGS:', line)
        if match:
            current = match.group(1)
            found[current] = []
        elif current and line.strip():
            found[current].append(line.strip())
    return found


def tasks_of(output, play_prefix):
    return [t for name, lines in plays(output).items() if name.startswith(play_prefix) for t in lines]


@pytest.mark.parametrize('tags', [(), ('--tags', 'install'), ('--tags', 'check'), ('--tags', 'rollout'),
                                  ('--tags', 'install,rollout'), ('--skip-tags', 'install')])
def test_every_selection_that_changes_a_host_validates_and_claims(runner, tags):
    output = listing(runner, *tags)
    assert [t for t in tasks_of(output, VALIDATE_PLAY) if t.startswith(VALIDATE)], output
    assert [t for t in tasks_of(output, VALIDATE_PLAY) if t.startswith(VALIDATE_STORES)], output
    assert [t for t in tasks_of(output, VALIDATE_PLAY) if t.startswith(CLAIM_HOSTS)], output
    assert [t for t in tasks_of(output, VALIDATE_PLAY) if t.startswith(CLAIM_STORES)], output
    for stage in ('Stage 2', 'Stage 4'):  # the guard comes before the first task that changes the host
        tasks = tasks_of(output, stage)
        changing = [i for i, t in enumerate(tasks) if t.startswith(CHANGING)]
        if changing:
            assert [t for t in tasks[:changing[0]] if t.startswith(GUARD)], (stage, output)


STAGE_TASKS = {'2': 'Install the LMCache server', '3': 'Predict N, plan every host with its probed N and check them all',
               '3b': 'Install the server package', '4': 'Configure the LMCache server',
               '5': 'Collect and show every host\'s result', '6': 'Refuse a router host whose ownership claim'}


@pytest.mark.parametrize('tags, stages', [
    (('--tags', 'validate'), ''), (('--tags', 'install'), '2'), (('--tags', 'check'), '2 3'),
    (('--tags', 'rollout'), '2 3 3b 4 5 6'), ((), '2 3 3b 4 5 6'), (('--skip-tags', 'install'), '3 3b 4 5 6')])
def test_each_selection_runs_its_stages_and_no_other(runner, tags, stages):
    """Stages that share a play carry their tags on their blocks: --tags install runs stage 2 without stage 3's
    check, --tags check stops before stage 3b and 4 change anything."""
    output = listing(runner, *tags)
    listed = [t for lines in plays(output).values() for t in lines]
    found = sorted(stage for stage, task in STAGE_TASKS.items() if [t for t in listed if task in t])
    assert found == sorted(stages.split()), output


def runs(output, play_prefix):
    return [t for t in tasks_of(output, play_prefix) if 'Install the server package' in t]


def test_rollout_deploys_the_kv_stores(runner):
    assert runs(listing(runner, '--tags', 'rollout'), STORES)
    assert runs(listing(runner), STORES)
    assert not runs(listing(runner, '--tags', 'install'), STORES)


def test_validate_alone_touches_no_host(runner, tmp_path):
    inventory = runner.write_inventory({'gpu-1': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
        'vllm_server_model': '/srv/models/qwen3-dense-tiny', 'vllm_server_device': 'cpu',
        'vllm_server_kv_connector': False}})
    code, output = runner.run('deploy.yml', inventory, '--tags', 'validate', '-e', 'fleet_manifest_path=%s' % (
        tmp_path / 'manifest.json'))
    assert code == 0, output[-4000:]
    assert re.search(r'TASK \[%s\] \**\nskipping: \[gpu-1\]' % re.escape(CLAIM_HOSTS), output), output[-4000:]
    assert not (tmp_path / 'manifest.json').exists()


def test_a_host_whose_claim_was_skipped_is_refused_before_stage_2(runner):
    inventory = runner.write_inventory({'gpu-1': {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}})
    code, output = runner.run('deploy.yml', inventory, '--tags', 'install', '--skip-tags', 'always')
    assert code != 0, output[-4000:]
    assert 'stage 1b of deploy.yml' in output and 'did not run, so nothing is installed' in output, output[-4000:]
    assert 'Install the LMCache server' not in output


CLAIM_ROUTERS = CLAIM_HOSTS
ROUTER_GUARD = 'Refuse a router host whose ownership claim (stage 1b) did not run'


def router_inventory(runner, **router_vars):
    inventory = {'all': {'children': {
        'vllm_hosts': {'children': {'small_hosts': {'hosts': {'gpu-1': {
            'ansible_host': '192.0.2.11', 'ansible_connection': 'ssh', 'ansible_ssh_executable': '/nonexistent/ssh',
            'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_host': '0.0.0.0'}}}}},
        'routers': {'hosts': {'rt-1': dict({
            'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
            'vllm_router_instances': [{'group': 'small_hosts', 'port': 30000, 'metrics_port': 29000}]},
            **router_vars)}}}}}
    path = runner.workdir / 'routers.yml'
    path.write_text(yaml.safe_dump(inventory))
    return str(path)


@pytest.mark.parametrize('tags', [(), ('--tags', 'install'), ('--tags', 'rollout'), ('--skip-tags', 'install')])
def test_every_selection_claims_on_the_router_hosts_and_stage_6_checks_it(runner, tags):
    code, output = runner.run('deploy.yml', router_inventory(runner), '--list-tasks', *tags)
    assert code == 0, output[-4000:]
    assert [t for t in tasks_of(output, VALIDATE_PLAY) if t.startswith(CLAIM_ROUTERS)], output
    stage6 = [t for t in tasks_of(output, ROUTERS_PLAY) if 'vllm_router' in t and 'Validating arguments' not in t
              or t.startswith(ROUTER_GUARD)]
    if stage6:  # the role's tasks run only after the guard
        assert stage6[0].startswith(ROUTER_GUARD), output
    assert bool(stage6) == (tags in ((), ('--tags', 'rollout'), ('--skip-tags', 'install'))), output


def test_a_router_host_whose_claim_was_skipped_is_refused_at_stage_6(runner, tmp_path):
    inventory = router_inventory(runner, vllm_router_manifest_path=str(tmp_path / 'router-manifest.json'))
    code, output = runner.run('deploy.yml', inventory, '--tags', 'rollout', '--skip-tags', 'always', '--limit', 'rt-1',
                              '-e', 'ansible_become=false')
    assert code != 0, output[-4000:]
    assert 'host rt-1: stage 1b of deploy.yml' in ' '.join(output.split()), output[-4000:]
    assert 'Install vllm-router' not in output and not (tmp_path / 'router-manifest.json').exists()


def test_a_failed_serving_host_fails_the_run_after_the_routers_of_the_others_started(runner):
    """Stages 5 and 6 share a play: a run_once failure fails every host of its play, so the failure of the run for a
    serving host that failed comes after the routers' tasks (the routers of the deployed hosts still start)."""
    tasks = tasks_of(listing(runner), ROUTERS_PLAY)
    fail = [i for i, t in enumerate(tasks) if t.startswith('Fail the run when a host failed')]
    routers = [i for i, t in enumerate(tasks) if t.startswith('lmcache_vllm.fleet.vllm_router : ')]
    summary = [i for i, t in enumerate(tasks) if t.startswith('Collect and show every host')]
    assert fail and routers and summary, tasks
    assert summary[0] < routers[0] and max(routers) < fail[0] == len(tasks) - 1, tasks
