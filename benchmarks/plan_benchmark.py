# -*- coding: utf-8 -*-
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Control-node cost of plan.yml and validate.yml per host against Ansible's own per-task floor.

    source scripts/env.sh
    python benchmarks/plan_benchmark.py [--sizes 30 300 1000] [--floor-sizes 30 300] [--forks 5]

For each size a generated inventory (hosts cycling through four shapes: the 27B at TP 2 and TP 4 with
FP8 KV cache, the 0.8B on CUDA and on CPU, model configurations from tests/fixtures/models) is planned
with playbooks/plan.yml and validated with playbooks/validate.yml, and, side by side in the same run,
the floor: a playbook writing the same five files per host (four units and environment files, plan.json)
with one ansible.builtin.copy task per file, nothing else. The floor is optional per size
(--floor-sizes): it costs Ansible's per-task overhead and takes tens of minutes at a thousand hosts on
two cores. Results go to benchmarks/results/plan-<time>.json and .md.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_common import machine  # noqa: E402 pylint: disable=wrong-import-position

MODELS = os.path.join(REPO, 'tests', 'fixtures', 'models')
SHAPES = (
    {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'model_dir': 'qwen3.6-27b', 'vllm_server_tensor_parallel_size': 2,
     'vllm_server_gpus': ['0', '1']},
    {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'model_dir': 'qwen3.6-27b', 'vllm_server_tensor_parallel_size': 4,
     'vllm_server_gpus': ['0', '1', '2', '3'], 'vllm_server_kv_cache_dtype': 'fp8'},
    {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'model_dir': 'qwen3.5-0.8b'},
    {'vllm_server_model': '/srv/models/Qwen3.5-0.8B', 'model_dir': 'qwen3.5-0.8b', 'vllm_server_device': 'cpu',
     'vllm_server_kv_connector': False},
)
FLOOR_FILES = ('lmcache-server.service', 'lmcache-server.env', 'vllm.service', 'vllm.env', 'plan.json')
FLOOR_PLAYBOOK = [{
    'name': "Ansible's floor: the same five files per host, one task per file",
    'hosts': 'vllm_hosts', 'gather_facts': False, 'connection': 'local',
    'vars': {'ansible_connection': 'local', 'ansible_python_interpreter': '{{ ansible_playbook_python }}'},
    'tasks': [{'name': 'Write %s' % name,
               'ansible.builtin.copy': {'content': '{{ floor_text }}', 'dest': '{{ floor_dir }}/{{ inventory_hostname }}/%s' % name,
                                        'mode': '0600' if name.endswith('.env') else '0644'}}
              for name in FLOOR_FILES],
}]


def host_vars(index):
    """The variables of generated host ``index`` (a shape of SHAPES, distinct ports on every other host)."""
    shape = dict(SHAPES[index % len(SHAPES)])
    shape['vllm_server_model_config'] = os.path.join(MODELS, shape.pop('model_dir'))
    shape.update(ansible_host='192.0.2.%d' % (index % 250 + 1), ansible_connection='ssh',
                 ansible_ssh_executable='/nonexistent/ssh', vllm_server_api_key='bench-key')
    if index % 2:
        shape.update(vllm_server_port=8001, lmcache_server_port=5556, lmcache_server_http_port=8081)
    return shape


def inventory(size):
    """A YAML inventory of ``size`` hosts in vllm_hosts."""
    hosts = {'bench-%04d' % i: host_vars(i) for i in range(size)}
    return {'all': {'children': {'vllm_hosts': {'hosts': hosts}}}}


def run_playbook(args, env):
    """(wall seconds, CPU seconds of ansible and its workers, exit code, output tail)."""
    before = os.times()
    start = time.monotonic()
    proc = subprocess.run(['ansible-playbook'] + args, cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    wall = time.monotonic() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return round(wall, 2), round(cpu, 2), proc.returncode, proc.stdout[-3000:]


def per_host(row, key, size):
    return None if row.get(key) is None else round(row[key] / size, 4)


def ratios(row):
    """plan and validate per host, and the plan over the floor (the target is at most 0.3)."""
    out = {}
    if row.get('floor_wall_s') and row.get('plan_wall_s'):
        out['plan_over_floor'] = round(row['plan_wall_s'] / row['floor_wall_s'], 3)
    return out


def measure(size, work, env, floor):
    inv = os.path.join(work, 'inventory-%d.yml' % size)
    with open(inv, 'w', encoding='utf-8') as handle:
        yaml.safe_dump(inventory(size), handle)
    row = {'hosts': size}
    plan_dir = os.path.join(work, 'plan-%d' % size)
    for name, args in (('plan', ['-i', inv, 'playbooks/plan.yml', '-e', 'fleet_plan_dir=%s' % plan_dir]),
                       ('validate', ['-i', inv, 'playbooks/validate.yml'])):
        wall, cpu, code, tail = run_playbook(args, env)
        if code:
            raise SystemExit('%s of %d hosts failed:\n%s' % (name, size, tail))
        row.update({'%s_wall_s' % name: wall, '%s_cpu_s' % name: cpu})
    if floor:
        floor_dir = os.path.join(work, 'floor-%d' % size)
        for i in range(size):
            os.makedirs(os.path.join(floor_dir, 'bench-%04d' % i))
        book = os.path.join(work, 'floor.yml')
        with open(book, 'w', encoding='utf-8') as handle:
            yaml.safe_dump(FLOOR_PLAYBOOK, handle, sort_keys=False)
        text = open(os.path.join(plan_dir, 'bench-0000', 'etc', 'systemd', 'system', 'vllm.service'), encoding='utf-8').read()
        wall, cpu, code, tail = run_playbook(['-i', inv, book, '-e', json.dumps({'floor_dir': floor_dir, 'floor_text': text})], env)
        if code:
            raise SystemExit('floor of %d hosts failed:\n%s' % (size, tail))
        row.update(floor_wall_s=wall, floor_cpu_s=cpu)
    for key in ('plan_wall_s', 'plan_cpu_s', 'validate_wall_s', 'floor_wall_s', 'floor_cpu_s'):
        row[key.replace('_s', '_s_per_host')] = per_host(row, key, size)
    row.update(ratios(row))
    return row


def markdown(rows, forks):
    lines = ['| hosts | plan.yml s | s/host | CPU s/host | validate.yml s | s/host | floor s (5 copy tasks/host) | s/host | plan / floor |',
             '|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for r in rows:
        lines.append('| %d | %s | %s | %s | %s | %s | %s | %s | %s |' % (
            r['hosts'], r['plan_wall_s'], r['plan_wall_s_per_host'], r['plan_cpu_s_per_host'], r['validate_wall_s'],
            r['validate_wall_s_per_host'], r.get('floor_wall_s', '-'), r.get('floor_wall_s_per_host') or '-',
            r.get('plan_over_floor', '-')))
    lines.append('')
    lines.append('forks %d; floor: one ansible.builtin.copy task per file, the same five files per host.' % forks)
    return '\n'.join(lines) + '\n'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--sizes', type=int, nargs='+', default=[30, 300, 1000])
    parser.add_argument('--floor-sizes', type=int, nargs='*', default=[30, 300])
    parser.add_argument('--forks', type=int, default=5)
    parser.add_argument('--out', default=os.path.join(HERE, 'results'))
    args = parser.parse_args()
    env = dict(os.environ, ANSIBLE_FORKS=str(args.forks), ANSIBLE_NOCOLOR='true', ANSIBLE_HOST_KEY_CHECKING='false',
               ANSIBLE_RETRY_FILES_ENABLED='false')
    work = tempfile.mkdtemp(prefix='plan-bench-')
    rows = []
    try:
        for size in args.sizes:
            rows.append(measure(size, work, env, size in args.floor_sizes))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stamp = time.strftime('%Y%m%dT%H%M%S', time.gmtime())
    data = {'machine': machine(forks=args.forks), 'rows': rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'plan-%s.json' % stamp), 'w', encoding='utf-8') as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
    with open(os.path.join(args.out, 'plan-%s.md' % stamp), 'w', encoding='utf-8') as handle:
        handle.write(markdown(rows, args.forks))
    print(markdown(rows, args.forks))


if __name__ == '__main__':
    main()
