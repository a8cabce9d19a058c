# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of lmcache_vllm.fleet.warm_start: deploy.yml's warm first start (documented in plugins/modules/warm_start.py).

The key and the decisions are ``module_utils/cli/compile_cache.py``'s; this action moves the tarball: the host packs
or unpacks with ``compile_cache_archive`` (no link followed) in root's temporary file, the control node fetches or
sends it with Ansible's own ``fetch`` and ``copy`` actions, and the temporary file is removed whatever happens."""

from __future__ import annotations

import os
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache
from ansible_collections.lmcache_vllm.fleet.plugins.modules.warm_start import ARGUMENT_SPEC

ARCHIVE = 'lmcache_vllm.fleet.compile_cache_archive'


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if self._task.check_mode:
            return dict(result, skipped=True, msg='the warm first start copies nothing in check mode')
        self._vars = task_vars
        host = task_vars['inventory_hostname']
        try:
            key = compile_cache.host_key(task_vars.get('__vllm_server_plan'),
                                         (task_vars.get('__vllm_server_probe_inputs') or {}).get('inputs'))
        except ValueError as exc:
            raise AnsibleActionFail('host %s: no compile-cache key: %s' % (host, exc)) from exc
        group = task_vars.get('__vllm_server_probe_group') or {}
        if not group.get('members'):
            raise AnsibleActionFail('host %s: no probe group (__vllm_server_probe_group, the role vllm_server\'s '
                                    'probe): run the probe first' % host)
        try:
            if params['step'] == 'seed':
                facts, changed = self._seed(host, key, group['members'][0])
            else:
                facts, changed = self._pack(host, key, params, result)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        facts['__fleet_cc_key'] = key
        message = facts.get('__fleet_cc_seeded') or facts.get('__fleet_cc_packed', {}).get('report') or ''
        return dict(result, changed=changed, msg=message, ansible_facts=facts)

    # ----------------------------------------------------------------------------------------------- the steps

    def _seed(self, host, key, source):
        """Unpack the first host's tarball into this host's HOME when both keys are equal; the facts and changed."""
        source_vars = self._vars['hostvars'][source]
        if '__fleet_cc_key' not in source_vars:
            return {'__fleet_cc_seeded': 'host %s: no compile caches to seed, the group\'s first host %s did not start '
                                         'in this run' % (host, source)}, False
        allowed, message = compile_cache.seed_between(host, key, source, source_vars['__fleet_cc_key'])
        if not allowed:
            return {'__fleet_cc_seeded': message}, False
        packed = source_vars.get('__fleet_cc_packed') or {}
        if not packed.get('path'):
            return {'__fleet_cc_seeded': 'host %s: %s had no compile cache to copy' % (host, source)}, False
        started = time.time()
        with self._host_tempfile() as remote:
            self._action('ansible.legacy.copy', {'src': packed['path'], 'dest': remote, 'mode': '0600'})
            self._module(ARCHIVE, {'state': 'unpack', 'home': key['home'], 'relative_dirs': key['relative_dirs'],
                                   'user': key['user'], 'group': key['group'], 'archive': remote})
        done = time.time()
        report = compile_cache.transfer_report(host, source, int(packed.get('size') or 0), done - started)
        return {'__fleet_cc_seeded': report, '__fleet_cc_seeded_at': done}, True

    def _pack(self, host, key, params, result):
        """Pack this first host's caches and fetch them, unless the control node holds this key's tarball and vLLM
        did not restart; the facts and changed (a tarball fetched anew)."""
        local = os.path.join(os.path.realpath(os.path.expanduser(params['cache_dir'])), key['tarball'])
        if not params['restarted'] and os.path.isfile(local):
            return {'__fleet_cc_packed': {'path': local, 'size': os.path.getsize(local)}}, False
        started = time.time()
        with self._host_tempfile() as remote:
            pack = self._module(ARCHIVE, {'state': 'pack', 'home': key['home'], 'relative_dirs': key['relative_dirs'],
                                          'user': key['user'], 'archive': remote})
            if pack.get('skipped'):
                result['skipped_paths'] = pack['skipped']
                result.setdefault('warnings', []).append(
                    'host %s: not packed under %s (a link, a special file or not the service user\'s): %s'
                    % (host, key['home'], ', '.join(pack['skipped'])))
            if not pack.get('packed'):
                return {'__fleet_cc_packed': {'report': 'host %s: no compile cache to pack under %s (vLLM compiled '
                                                        'nothing, as with --enforce-eager)' % (host, key['home'])}}, False
            fetched = self._action('ansible.legacy.fetch', {'src': remote, 'dest': local, 'flat': True})
        size = os.path.getsize(local)
        report = compile_cache.transfer_report(host, host, size, time.time() - started)
        return {'__fleet_cc_packed': {'path': local, 'size': size, 'report': report}}, bool(fetched.get('changed'))

    # ----------------------------------------------------------------------------------------------- the host

    def _module(self, name, args):
        """Run module ``name`` on the host; its result, AnsibleActionFail with its message when it failed."""
        res = self._execute_module(module_name=name, module_args=args, task_vars=self._vars)
        if res.get('failed') or res.get('unreachable'):
            raise AnsibleActionFail(res.get('msg') or '%s failed' % name, result=res)
        return res

    def _action(self, name, args):
        """Run Ansible's action ``name`` (copy, fetch) with ``args`` as a task of its own; its result."""
        task = self._task.copy()
        task.args = args
        action = self._shared_loader_obj.action_loader.get(
            name, task=task, connection=self._connection, play_context=self._play_context, loader=self._loader,
            templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        res = action.run(task_vars=self._vars)
        if res.get('failed') or res.get('unreachable'):
            raise AnsibleActionFail(res.get('msg') or '%s failed' % name, result=res)
        return res

    def _host_tempfile(self):
        return _HostTempfile(self)


class _HostTempfile:
    """Root's temporary file for the tarball on the host (module tempfile, outside the service user's HOME), removed
    again on the way out whatever happened."""

    def __init__(self, action):
        self.action, self.path = action, None

    def __enter__(self):
        self.path = self.action._module('ansible.legacy.tempfile', {'suffix': '.tar.gz'})['path']
        return self.path

    def __exit__(self, *exc):
        self.action._module('ansible.legacy.file', {'path': self.path, 'state': 'absent'})
        return False
