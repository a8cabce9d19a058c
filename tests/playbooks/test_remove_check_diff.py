# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""remove.yml --check --diff previews the removal one line per path: no per-file diff of a virtualenv."""

from __future__ import annotations


from test_day2 import deployed_tree, local_host, write_inventory


def test_remove_check_diff_lists_each_path_once(runner, tmp_path):
    root = tmp_path / 'host'
    deployed_tree(root)
    venv = root / 'opt' / 'vllm' / 'venv' / 'lib' / 'python3.11' / 'site-packages'
    for i in range(200):  # a virtualenv holds thousands of files
        (venv / ('pkg%03d' % i)).mkdir(parents=True)
        (venv / ('pkg%03d' % i) / '__init__.py').write_text('')
    inventory = write_inventory(tmp_path, {'localhost': local_host(root)})
    before = sorted(str(p.relative_to(root)) for p in root.rglob('*'))

    code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false', '--check', '--diff')

    assert code == 0, output[-6000:]
    assert sorted(str(p.relative_to(root)) for p in root.rglob('*')) == before, 'check mode changed files'
    assert 'pkg0' not in output, 'a file inside a virtualenv was listed'
    # the diff of the removal: one line per path of the collection, the virtualenv as one line
    venv_lines = [line for line in output.splitlines() if line == '-%s/opt/vllm/venv' % root]
    assert len(venv_lines) == 1, output[-6000:]
    assert '-%s/etc/fleet-test-vllm.env' % root in output.splitlines()
    assert len(output.splitlines()) < 200
