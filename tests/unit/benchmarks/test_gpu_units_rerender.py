# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/gpu_units_rerender.py's verdict on the files a re-render compares (the rendering itself is
tests/gpu/acceptance.py's, exercised by the GPU suite's own tests)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope='module')
def rerender(repo_script):
    return repo_script('benchmarks/gpu_units_rerender.py')


def test_only_a_changed_unit_or_environment_file_makes_a_difference(rerender):
    same = {'etc/systemd/system/vllm.service': ['a', 'a'], 'plan.json': ['p', 'p']}
    report_only = {'etc/systemd/system/vllm.service': ['a', 'a'], 'plan.json': ['p', 'q']}
    unit = {'etc/systemd/system/vllm.service': ['a', 'b'], 'plan.json': ['p', 'p']}
    missing = {'etc/lmcache-vllm-fleet/vllm.env': ['e', None]}
    assert rerender._state(same) == 'identical'  # pylint: disable=protected-access
    assert rerender._state(report_only) == 'units identical (plan.json differs)'  # pylint: disable=protected-access
    assert rerender._state(unit) == rerender._state(missing) == 'different'  # pylint: disable=protected-access


def test_a_file_that_is_no_acceptance_result_is_refused(rerender, tmp_path):
    path = tmp_path / 'tree-check.json'
    path.write_text(json.dumps({'commit': 'x', 'blobs': 3}))
    with pytest.raises(SystemExit, match='not a GPU acceptance result'):
        rerender.main([str(path)])
