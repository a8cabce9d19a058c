# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The layout measures of docs/layout.md, printed for the checkout it runs in.

    python benchmarks/layout_measures.py [--repo DIR] [--json]

1. functions in plugins/ over 60 lines (from ``def`` to the last line of the body);
2. Python files over 450 code lines (blank lines, comments, docstrings and the modules'
   ``DOCUMENTATION`` / ``EXAMPLES`` / ``RETURN`` strings not counted);
3. ``{% %}`` statement lines in playbooks/ and roles/ (every line holding ``{%``);
4. pairs of the ``duplicates`` command that touch plugins/, or that join tests/ and benchmarks/
   (scaffolding written twice); skipped when that command is not installed;
5. the tasks that enter ``roles/vllm_server/tasks/probe.yml`` (``include_role``/``import_role`` of the role with
   ``tasks_from: probe``, or ``include_tasks``/``import_tasks`` of ``probe.yml`` inside the role);
6. the private host facts (``__`` names) the fleet tables read (``fleet_report.INPUTS``);
7. raw setting reads (``cfg.get(``, ``cfg[``) of the host plan's files that run after validation;
8. the YAML files a deploy reads: from ``playbooks/deploy.yml`` along ``import_playbook``, ``include_tasks`` /
   ``import_tasks``, ``include_role`` / ``import_role`` (``tasks_from`` or ``main.yml``), a play's ``roles``, a
   role's ``meta/main.yml`` dependencies and its ``defaults``/``vars``, and the plays of every playbook on the way
   (paths written with Jinja are not followed).

It reports and exits 0: the limits are targets of the layout work (docs/layout.md), not a gate.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUNCTION_LIMIT = 60
FILE_LIMIT = 450
STATEMENT_LIMIT = 20
DOC_CONSTANTS = ('DOCUMENTATION', 'EXAMPLES', 'RETURN')
PAIR_RE = re.compile(r'^D\d+ (\S+?):\d+-\d+ ~ (\S+?):\d+-\d+')
PROBE_ROLE = 'vllm_server'
AFTER_VALIDATION = ('plugins/module_utils/plan/plan_units.py', 'plugins/module_utils/plan/host_plan.py')
RAW_READ_RE = re.compile(r'\bcfg(?:\.get\(|\[)')


def tracked(repo, *prefixes):
    """Files git knows (tracked, or new and not ignored) under the prefixes, sorted."""
    proc = subprocess.run(['git', '-C', repo, 'ls-files', '--cached', '--others', '--exclude-standard', '--']
                          + list(prefixes), stdout=subprocess.PIPE, universal_newlines=True, check=True)
    return sorted(p for p in proc.stdout.splitlines() if os.path.isfile(os.path.join(repo, p)))


def _doc_lines(tree):
    """Line numbers of docstrings and of the modules' documentation constants."""
    lines = set()
    for node in ast.walk(tree):
        body = getattr(node, 'body', None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) \
                and any(isinstance(t, ast.Name) and t.id in DOC_CONSTANTS for t in node.targets):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def code_lines(text, tree):
    """Lines that are neither blank, nor comments, nor documentation."""
    docs = _doc_lines(tree)
    return sum(1 for number, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith('#') and number not in docs)


def long_functions(path, tree, limit=FUNCTION_LIMIT):
    """(path:line name, lines) of every function longer than ``limit`` lines, nested ones included."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                out.append(('%s:%d %s' % (path, node.lineno, node.name), length))
    return out


def python_measures(repo):
    functions, files = [], []
    for path in tracked(repo, '*.py'):
        with open(os.path.join(repo, path), encoding='utf-8') as handle:
            text = handle.read()
        try:
            tree = ast.parse(text, path)
        except SyntaxError as exc:
            files.append(('%s (does not parse: %s)' % (path, exc.msg), 0))
            continue
        if path.startswith('plugins/'):
            functions.extend(long_functions(path, tree))
        count = code_lines(text, tree)
        if count > FILE_LIMIT:
            files.append((path, count))
    return sorted(functions, key=lambda x: -x[1]), sorted(files, key=lambda x: -x[1])


def statement_lines(repo):
    """{path: number of lines holding a Jinja statement} under playbooks/ and roles/."""
    out = {}
    for path in tracked(repo, 'playbooks', 'roles'):
        try:
            with open(os.path.join(repo, path), encoding='utf-8') as handle:
                count = sum(1 for line in handle if '{%' in line)
        except UnicodeDecodeError:
            continue
        if count:
            out[path] = count
    return out


def _enters_probe(task, path):
    """Whether one task (a dict of a YAML task list) enters the probe's task file."""
    for key in ('include_role', 'import_role', 'ansible.builtin.include_role', 'ansible.builtin.import_role'):
        spec = task.get(key)
        if isinstance(spec, dict) and str(spec.get('name', '')).endswith(PROBE_ROLE) and spec.get('tasks_from') == 'probe':
            return True
    for key in ('include_tasks', 'import_tasks', 'ansible.builtin.include_tasks', 'ansible.builtin.import_tasks'):
        spec = task.get(key)
        target = spec.get('file') if isinstance(spec, dict) else spec
        if target == 'probe.yml' and path.startswith('roles/%s/' % PROBE_ROLE):
            return True
    return False


def _walk_tasks(node, path, found):
    if isinstance(node, list):
        for item in node:
            _walk_tasks(item, path, found)
    elif isinstance(node, dict):
        if _enters_probe(node, path):
            found.append('%s: %s' % (path, node.get('name', '?')))
        for value in node.values():
            if isinstance(value, (list, dict)):
                _walk_tasks(value, path, found)


def probe_entries(repo):
    """``path: task name`` of every task that enters roles/vllm_server/tasks/probe.yml."""
    import yaml  # pylint: disable=import-outside-toplevel

    found = []
    for path in tracked(repo, 'playbooks', 'roles'):
        if not path.endswith(('.yml', '.yaml')) or '/templates/' in path:
            continue
        with open(os.path.join(repo, path), encoding='utf-8') as handle:
            try:
                data = yaml.safe_load(handle)
            except yaml.YAMLError:
                continue
        _walk_tasks(data, path, found)
    return found


def private_table_facts(repo):
    """The ``__`` host facts fleet_report.INPUTS lists (read with ast, nothing imported)."""
    path = os.path.join(repo, 'plugins', 'module_utils', 'report', 'fleet_report.py')
    with open(path, encoding='utf-8') as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == 'INPUTS' for t in node.targets):
            names = [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            return sorted(set(n for n in names if n.startswith('__')))
    return []


def raw_reads(repo):
    """{path: raw setting reads} of the host plan's files that run after validation."""
    out = {}
    for path in AFTER_VALIDATION:
        with open(os.path.join(repo, path), encoding='utf-8') as handle:
            out[path] = len(RAW_READ_RE.findall(handle.read()))
    return out


ROLE_KEYS = ('include_role', 'import_role', 'ansible.builtin.include_role', 'ansible.builtin.import_role')
TASK_KEYS = ('include_tasks', 'import_tasks', 'ansible.builtin.include_tasks', 'ansible.builtin.import_tasks')
PLAYBOOK_KEYS = ('import_playbook', 'ansible.builtin.import_playbook')


def _role_files(repo, name, tasks_from='main'):
    role = os.path.join(repo, 'roles', str(name).rsplit('.', maxsplit=1)[-1])
    files = [os.path.join(role, 'tasks', '%s.yml' % tasks_from)]
    files += [os.path.join(role, sub, 'main.yml') for sub in ('defaults', 'vars', 'meta')]
    return [f for f in files if os.path.isfile(f)]


def _references(repo, path, node):
    """The YAML files one parsed node refers to (relative to ``path``'s folder, or a role's)."""
    out, here = [], os.path.dirname(path)
    if isinstance(node, list):
        for item in node:
            out += _references(repo, path, item)
        return out
    if not isinstance(node, dict):
        return out
    for key, value in node.items():
        target = value.get('file') if isinstance(value, dict) and key in TASK_KEYS else value
        if key in TASK_KEYS + PLAYBOOK_KEYS and isinstance(target, str) and '{{' not in target:
            out.append(os.path.normpath(os.path.join(here, target)))
        elif key in ROLE_KEYS and isinstance(value, dict):
            out += _role_files(repo, value.get('name', ''), value.get('tasks_from', 'main'))
        elif key in ('roles', 'dependencies') and isinstance(value, list):
            for role in value:
                out += _role_files(repo, role.get('role', role.get('name', '')) if isinstance(role, dict) else role)
        elif isinstance(value, (list, dict)):
            out += _references(repo, path, value)
    return out


def deploy_files(repo):
    """The repository's YAML files a deploy reads, from playbooks/deploy.yml (``_references``)."""
    import yaml  # pylint: disable=import-outside-toplevel

    seen, todo = set(), [os.path.join(repo, 'playbooks', 'deploy.yml')]
    while todo:
        path = os.path.normpath(todo.pop())
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        with open(path, encoding='utf-8') as handle:
            todo += _references(repo, path, yaml.safe_load(handle))
    return sorted(os.path.relpath(p, repo) for p in seen)


def _touches(left, right):
    sides = (left, right)
    if any(side.startswith('plugins/') for side in sides):
        return True
    tops = set(side.split('/', 1)[0] for side in sides)
    return tops == {'tests', 'benchmarks'}


def duplicate_pairs(repo):
    """Rows of ``duplicates`` that touch plugins/ or join tests/ and benchmarks/; None without the command."""
    exe = shutil.which('duplicates')
    if not exe:
        return None
    proc = subprocess.run([exe, '--repo', repo, '--most', '200', '--seconds', '120'], stdout=subprocess.PIPE,
                          universal_newlines=True, check=False)
    rows = []
    for line in proc.stdout.splitlines():
        match = PAIR_RE.match(line)
        if match and _touches(match.group(1), match.group(2)):
            rows.append(line)
    return rows


def measure(repo):
    functions, files = python_measures(repo)
    statements = statement_lines(repo)
    return {'functions_over_%d_lines' % FUNCTION_LIMIT: functions,
            'files_over_%d_code_lines' % FILE_LIMIT: files,
            'jinja_statement_lines': sum(statements.values()),
            'jinja_statement_lines_by_file': statements,
            'duplicate_pairs': duplicate_pairs(repo),
            'probe_entries': probe_entries(repo),
            'private_table_facts': private_table_facts(repo),
            'raw_reads_after_validation': raw_reads(repo),
            'deploy_files': deploy_files(repo)}


def report(data):
    lines = []
    functions = data['functions_over_%d_lines' % FUNCTION_LIMIT]
    lines.append('functions in plugins/ over %d lines: %d' % (FUNCTION_LIMIT, len(functions)))
    lines.extend('  %4d  %s' % (length, where) for where, length in functions)
    files = data['files_over_%d_code_lines' % FILE_LIMIT]
    lines.append('Python files over %d code lines (docstrings excluded): %d' % (FILE_LIMIT, len(files)))
    lines.extend('  %4d  %s' % (count, path) for path, count in files)
    lines.append('{%% %%} statement lines in playbooks/ and roles/: %d (target: at most %d)'
                 % (data['jinja_statement_lines'], STATEMENT_LIMIT))
    lines.extend('  %4d  %s' % (count, path) for path, count in sorted(
        data['jinja_statement_lines_by_file'].items(), key=lambda x: (-x[1], x[0])))
    pairs = data['duplicate_pairs']
    if pairs is None:
        lines.append('duplicates pairs touching plugins/ or tests/ ~ benchmarks/: not measured (no duplicates command)')
    else:
        lines.append('duplicates pairs touching plugins/ or tests/ ~ benchmarks/: %d' % len(pairs))
        lines.extend('  ' + row for row in pairs)
    entries = data['probe_entries']
    lines.append('tasks entering roles/vllm_server/tasks/probe.yml: %d' % len(entries))
    lines.extend('  ' + entry for entry in entries)
    private = data['private_table_facts']
    lines.append('private host facts the fleet tables read: %d%s' % (len(private), (' (%s)' % ', '.join(private)) if private else ''))
    reads = data['raw_reads_after_validation']
    lines.append('raw setting reads after validation: %d' % sum(reads.values()))
    lines.extend('  %4d  %s' % (count, path) for path, count in sorted(reads.items()))
    steps = [f for f in data['deploy_files'] if f.startswith('playbooks/') or '/tasks/' in f]
    lines.append('YAML files a deploy reads: %d (%d playbooks and task files, %d role defaults, vars and meta)'
                 % (len(data['deploy_files']), len(steps), len(data['deploy_files']) - len(steps)))
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--repo', default=REPO, help='the checkout to measure (default: this one)')
    parser.add_argument('--json', action='store_true', help='print JSON instead of text')
    args = parser.parse_args(argv)
    data = measure(os.path.abspath(args.repo))
    print(json.dumps(data, indent=1) if args.json else report(data))
    return 0


if __name__ == '__main__':
    sys.exit(main())
