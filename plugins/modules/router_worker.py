#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: router_worker
short_description: Take a vLLM host out of a running vllm-router, or put it back (draining around a restart)
version_added: "0.1.0"
description:
  - Calls the administration API of one vllm-router on the router's own host (run it there, e.g. with
    C(delegate_to)) - C(GET /list_workers), then C(POST /remove_worker?url=) (O(state=absent)) or
    C(POST /add_worker?url=) (O(state=present)) only when the worker is (not) listed.
  - With O(state=absent) and O(wait_idle) > 0, it then waits at most that many seconds until the worker's vLLM
    runs and queues no request (C(vllm:num_requests_running) + C(vllm:num_requests_waiting) of the worker's
    C(/metrics)).
  - A router that does not answer (stopped, or not deployed yet on a first deploy) is not an error - the module
    succeeds unchanged, with a warning when it was to take the worker out (a router that starts again routes to
    every worker of its unit, so putting one back needs none). A worker the router refuses to add (its C(/health)
    did not answer within the router's C(--worker-startup-timeout-secs)) is a warning too.
  - The API takes no key (the collection never sets the router's C(--api-key)); nothing secret is sent.
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
attributes:
  check_mode:
    support: full
    description: In check mode the router's workers are read, never changed; the result says what would change.
  diff_mode:
    support: none
    description: No diff.
options:
  router_url:
    description: The router's address on its host, C(http://127.0.0.1:30000) (the C(url) of a router plan instance).
    type: str
    required: true
  worker_url:
    description: The worker as the router knows it (C(http://host:port), from the router plan).
    type: str
    required: true
  state:
    description: V(absent) takes the worker out, V(present) puts it back.
    type: str
    choices: [absent, present]
    required: true
  wait_idle:
    description: With O(state=absent), seconds to wait for the worker's running requests to end (0 does not wait).
    type: int
    default: 0
  timeout:
    description: Seconds one call to the router may take (C(/add_worker) waits for the worker's C(/health)).
    type: int
    default: 60
"""

EXAMPLES = r"""
- name: Take the host out of its router before it restarts
  lmcache_vllm.fleet.router_worker:
    router_url: http://127.0.0.1:30000
    worker_url: http://10.20.0.11:8000
    state: absent
    wait_idle: 120
  delegate_to: rt-01
"""

RETURN = r"""
workers:
  description: The router's workers after the call (before it, in check mode); empty when the router did not answer.
  type: list
  elements: str
  returned: always
idle:
  description: Whether the worker ran no request when the module returned (null when it did not wait or could not read).
  type: bool
  returned: always
in_flight:
  description: The worker's running and waiting requests when the wait ended (null when unknown).
  type: int
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_admin


def apply(router_url, worker_url, present, check_mode, wait_idle=0, timeout=60):
    """(changed, workers, warnings, idle, in_flight) of one call; the module's whole logic, for tests too."""
    worker_url = worker_url.rstrip('/')
    try:
        workers = router_admin.list_workers(router_url, timeout=10)
    except router_admin.RouterUnreachable as exc:
        # a router that is down starts again with every worker of its unit: only taking one out needs a warning
        return False, [], [] if present else ['the router at %s did not answer, %s was not taken out of it: %s' % (
            router_url, worker_url, exc)], None, None
    changed = (worker_url in workers) != present
    warnings, idle, in_flight = [], None, None
    if changed and not check_mode:
        try:
            ok, answer = router_admin.set_worker(router_url, worker_url, present, timeout=timeout)
        except router_admin.RouterUnreachable as exc:
            ok, answer = False, str(exc)
        if not ok:
            warnings.append('the router at %s did not %s %s: %s' % (
                router_url, 'add' if present else 'remove', worker_url, answer))
            changed = False
        workers = router_admin.list_workers(router_url, timeout=10) if ok else workers
    if not present and wait_idle > 0 and not check_mode:
        idle, in_flight = router_admin.wait_idle(worker_url, wait_idle)
        if not idle:
            warnings.append('%s still had %s request(s) in flight after %d s; it restarts now' % (
                worker_url, 'unknown' if in_flight is None else in_flight, wait_idle))
    return changed, workers, warnings, idle, in_flight


def main():
    module = AnsibleModule(argument_spec=dict(
        router_url=dict(type='str', required=True),
        worker_url=dict(type='str', required=True),
        state=dict(type='str', required=True, choices=['absent', 'present']),
        wait_idle=dict(type='int', default=0),
        timeout=dict(type='int', default=60),
    ), supports_check_mode=True)
    p = module.params
    for name in ('router_url', 'worker_url'):
        if not p[name].startswith(('http://', 'https://')):
            module.fail_json(msg='%s %r is not an http:// URL' % (name, p[name]))
    changed, workers, warnings, idle, in_flight = apply(
        p['router_url'], p['worker_url'], p['state'] == 'present', module.check_mode, p['wait_idle'], p['timeout'])
    for text in warnings:
        module.warn(text)
    module.exit_json(changed=changed, workers=workers, idle=idle, in_flight=in_flight)


if __name__ == '__main__':
    main()
