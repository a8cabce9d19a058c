# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module side of the collection's action plugins (fleet_plan, probe_group, warm_start, fleet_claim): their
module files hold the documentation and the argument spec; run as a module, they refuse."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule


def refuse(name, argument_spec):
    """Fail: ``name`` runs through its action plugin (the arguments are checked first, as the action checks them)."""
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    module.fail_json(msg='%s runs through its action plugin; call it as a task, not as a module' % name)
