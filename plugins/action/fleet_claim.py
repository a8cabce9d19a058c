# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of lmcache_vllm.fleet.fleet_claim: deploy.yml's ownership claims, every kind of a host in one task
(documented in plugins/modules/fleet_claim.py). The rules are ``shared/ownership.py``'s, run on the host by the module
``fleet_ownership``; the entries come from the plans validate.yml made on the control node."""

from __future__ import annotations

import posixpath

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.lmcache_vllm.fleet.plugins.modules.fleet_claim import ARGUMENT_SPEC, ONE_OF

# Each kind of host: the fact holding its plan (validate.yml's) and the fact that records the claim (or None).
KINDS = (
    ('serving', '__fleet_plan', '__fleet_claimed'),
    ('store', '__kv_store_check', None),
    ('router', '__vllm_router_check', '__vllm_router_claimed'),
)

# What a later stage says of a host whose claim of that kind did not run (option require).
UNCLAIMED = {
    'serving': ('the refusal of what the collection did not create, and its claim in the manifest',
                'nothing is installed or restarted'),
    'router': ('the refusal of what the collection did not create on the router host, and its claim in '
               'vllm_router_manifest_path', 'no router is installed or restarted'),
}


def unclaimed_message(host, kind):
    """The refusal of a later stage on a host whose claim of ``kind`` did not run."""
    what, spared = UNCLAIMED[kind]
    return ('host %s: stage 1b of deploy.yml (%s) did not run, so %s. Fix: do not skip the tag always (--skip-tags '
            'always), and select stages with --tags validate, install, check or rollout only' % (host, what, spared))


def claim_arguments(host, kind, plan):
    """The fleet_ownership arguments of one kind's claim (a serving host also names its rollback copies)."""
    args = {'state': 'claim', 'host': host, 'entries': plan['ownership'], 'manifest': plan['manifest_path']}
    if kind == 'serving':
        args['backup_names'] = [posixpath.basename(path) for path in plan['files']]
    return args


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC, mutually_exclusive=ONE_OF,
                                                          required_one_of=ONE_OF)
        host = task_vars['inventory_hostname']
        if params['require']:
            claimed = dict((kind, fact) for kind, _plan, fact in KINDS)[params['require']]
            if not boolean(task_vars.get(claimed, False), strict=False):
                result.update(failed=True, msg=unclaimed_message(host, params['require']))
            return dict(result, changed=False)
        claims, problems, facts, changed = [], [], {}, False
        try:
            for kind, plan_fact, claimed_fact in KINDS:
                if host not in (params['kinds'].get(kind) or []):
                    continue
                plan = task_vars.get(plan_fact)
                if not isinstance(plan, dict) or 'ownership' not in plan:
                    raise AnsibleActionFail('host %s: no %s plan (%s, made by validate.yml): run deploy.yml whole, '
                                            'validation first' % (host, kind, plan_fact))
                res = self._execute_module(module_name='lmcache_vllm.fleet.fleet_ownership',
                                           module_args=claim_arguments(host, kind, plan), task_vars=task_vars)
                claims.append({'kind': kind, 'manifest': plan['manifest_path'], 'status': res.get('status') or {}})
                problems += res.get('problems') or []
                if res.get('failed') and not res.get('problems'):
                    problems.append(res.get('msg') or 'host %s: the %s claim failed' % (host, kind))
                changed |= bool(res.get('changed'))
                if res.get('failed'):
                    break  # nothing more is claimed on a host that refused (its other manifests stay as they are)
                if claimed_fact:
                    facts[claimed_fact] = True
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(changed=changed, claims=claims, problems=problems, ansible_facts=facts)
        if problems:
            result.update(failed=True, msg=' | '.join(problems))
        return result
