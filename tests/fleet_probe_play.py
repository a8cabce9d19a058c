# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The throw-away probe play: ``block_size_probe`` through ``ansible-playbook``, its result read back.

Used by tests/real, tests/gpu and the benchmarks; standard library only, no pytest.

    play = ProbePlay(work_dir, {"model": ..., "vllm_executable": ...})
    result, wall_seconds, output = play.run(timeout=900)   # result: the registered dict, or None

``ProbePlay.popen()`` starts it without waiting (for a memory sampler that watches the process tree);
``ProbePlay.result()`` reads the registered result afterwards. The checkout runs as the collection
through ``fleet_collection.collections_tree(<work>/collections)``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from fleet_collection import ansible_env, ansible_playbook_argv, collections_tree

LOCALHOST = 'localhost,'
PLAY = """\
- hosts: %(hosts)s
  gather_facts: false
  tasks:
    - name: Probe N
      lmcache_vllm.fleet.block_size_probe: %(args)s
      register: probe
      ignore_errors: true
    - name: Save the result
      ansible.builtin.copy:
        content: "{{ probe | to_json }}"
        dest: %(out)s
      delegate_to: localhost
      check_mode: false
"""


class ProbePlay:
    """One run of the probe play on ``hosts`` of ``inventory`` (default: this machine, this Python)."""

    def __init__(self, work, args, inventory=LOCALHOST, hosts='localhost', check=False, name='probe', extra=()):
        work = str(work)
        os.makedirs(work, exist_ok=True)
        self.result_path = os.path.join(work, name + '-result.json')
        self.play_path = os.path.join(work, name + '.yml')
        with open(self.play_path, 'w', encoding='utf-8') as handle:
            handle.write(PLAY % {'hosts': hosts, 'args': json.dumps(args), 'out': json.dumps(self.result_path)})
        local = inventory == LOCALHOST
        self.argv = ansible_playbook_argv() + (['-c', 'local'] if local else []) + ['-i', inventory, self.play_path]
        self.argv += list(extra) + (['--check'] if check else [])
        self.env = ansible_env(collections_tree(os.path.join(work, 'collections')), local=local)
        self.env.setdefault('ANSIBLE_LOCAL_TEMP', os.path.join(work, 'ansible-tmp'))

    def popen(self, **kwargs):
        """Start ansible-playbook (a stale result is removed first); returns the Popen."""
        if os.path.exists(self.result_path):
            os.unlink(self.result_path)
        return subprocess.Popen(self.argv, env=self.env, **kwargs)  # pylint: disable=consider-using-with

    def result(self):
        """The registered result of the probe task, or None when the play did not write it."""
        try:
            with open(self.result_path, encoding='utf-8') as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def run(self, timeout=900):
        """(result or None, wall seconds, output of ansible-playbook)."""
        start = time.monotonic()
        proc = self.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        try:
            output = proc.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            output = proc.communicate()[0] + '\n(ansible-playbook killed after %s s)' % timeout
        return self.result(), time.monotonic() - start, output
