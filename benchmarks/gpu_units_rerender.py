# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether this checkout renders the units a GPU acceptance ran, byte for byte (no GPU needed).

    python benchmarks/gpu_units_rerender.py RESULT.json [CASES] [--json OUT]

A GPU acceptance (tests/gpu/suite.py) records, for each serving case, the sha256 of every file ``plan.yml`` rendered
for its host (units, environment files, ``plan.json``) and the N it rendered them with. This script renders the same
case with this checkout's ``plan.yml`` (tests/gpu/acceptance.py's own ``render``, the case's host variables and
overrides from tests/gpu/suite.py, that N) and compares the hashes. Identical units and environment files mean the
commit under test would start the very processes the acceptance started (``plan.json`` is the plan's report: it may
differ). The units name the GPU host's paths (``/opt/gpukit/tree/...``, ``/opt/gpukit/venv``): the script links
``/opt/gpukit/tree`` to this checkout when that path is free (it needs to write there) and refuses when it names
another tree. Cases without recorded hashes (the L2 and P2P cases render passwords and work directories of their run)
are listed as not comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU_TREE = '/opt/gpukit/tree'
GPU_VENV = '/opt/gpukit/venv'


def _link_tree():
    """``/opt/gpukit/tree`` pointing at this checkout (made when absent)."""
    if os.path.islink(GPU_TREE) and os.path.realpath(GPU_TREE) == os.path.realpath(REPO):
        return
    if os.path.lexists(GPU_TREE):
        raise SystemExit('%s exists and is not a link to %s; move it aside first' % (GPU_TREE, REPO))
    os.makedirs(os.path.dirname(GPU_TREE), exist_ok=True)
    os.symlink(REPO, GPU_TREE)


def compare(result, names):
    """{case: {'N', 'state': identical | different | not comparable, 'files': {path: [recorded, now]}}}."""
    sys.path.insert(0, os.path.join(GPU_TREE, 'tests', 'gpu'))
    import yaml  # pylint: disable=import-outside-toplevel
    import acceptance  # pylint: disable=import-error,import-outside-toplevel
    import suite  # pylint: disable=import-error,import-outside-toplevel

    out = {}
    for name in names:
        recorded = result['cases'][name]
        want = recorded.get('unit_sha256')
        if not want:
            out[name] = {'N': recorded.get('N'), 'state': 'not comparable', 'files': {}}
            continue
        _model, host_vars, _gmu = suite.CASES[name]
        argv = suite.case_argv(name, GPU_VENV, os.devnull, '-', '-', '-')
        sets = [argv[i + 1] for i, arg in enumerate(argv) if arg == '--set']
        with open(os.path.join(GPU_TREE, 'tests', 'gpu', host_vars), encoding='utf-8') as handle:
            variables = acceptance.apply_overrides(yaml.safe_load(handle), sets)
        root = acceptance.render(tempfile.mkdtemp(prefix='gpu-rerender-'), recorded['model_dir'], variables,
                                 recorded['N'])
        got = acceptance.unit_hashes(root)
        files = dict((path, [want.get(path), got.get(path)]) for path in sorted(set(want) | set(got)))
        out[name] = {'N': recorded['N'], 'state': _state(files), 'files': files}
    return out


def _state(files):
    """identical; units identical (only plan.json, the plan's report, differs); or different."""
    differing = [path for path, (was, now) in files.items() if was != now]
    if not differing:
        return 'identical'
    return 'units identical (plan.json differs)' if differing == ['plan.json'] else 'different'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('result', help='a GPU acceptance JSON (benchmarks/results/gpu-acceptance/...)')
    parser.add_argument('cases', nargs='?', help='comma-separated cases (default: every case of the result)')
    parser.add_argument('--json', help='also write the comparison here')
    args = parser.parse_args(argv)
    with open(args.result, encoding='utf-8') as handle:
        result = json.load(handle)
    if not isinstance(result.get('cases'), dict):
        raise SystemExit('%s is not a GPU acceptance result (no cases)' % args.result)
    names = args.cases.split(',') if args.cases else sorted(result['cases'])
    _link_tree()
    head = subprocess.run(['git', '-C', REPO, 'rev-parse', 'HEAD'], capture_output=True, text=True, check=False)
    report = {'result': os.path.basename(args.result), 'recorded_commit': result.get('commit'),
              'rendered_by': head.stdout.strip() or None, 'cases': compare(result, names)}
    for name, case in report['cases'].items():
        print('%s: N=%s, %s' % (name, case['N'], case['state']))
        for path, (was, now) in case['files'].items():
            if was != now:
                print('  %s: %s -> %s' % (path, (was or '-')[:12], (now or '-')[:12]))
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as handle:
            json.dump(report, handle, indent=1, sort_keys=True)
    return 0 if all(c['state'] != 'different' for c in report['cases'].values()) else 1


if __name__ == '__main__':
    sys.exit(main())
