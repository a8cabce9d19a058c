# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hardware groups: hosts whose inputs of N are identical probe once, on one host (the canary).

Two hosts with the same fingerprint inputs (``fingerprint.fingerprint_inputs``: model, vLLM version,
platform, TP, dtypes, block size, speculative configuration, the extra arguments and environment that
change N, and the hardware) print the same N. The hardware identity of the probe's fingerprint names
each GPU (index, UUID) so that a cached N never crosses machines; a group compares the hardware by
kind instead: the GPU models, compute capabilities and memory sizes in order (so their count), the
driver version, or the CPU model and ISA flags.

Pure logic, used on the control node:

``group_inputs(inputs)`` / ``group_key(inputs)``
    The fingerprint inputs without the probe mode and without per-device identity, and their hash.
``form_groups(hosts, cached=())``
    ``hosts``: ``[(host, inputs or None), ...]`` in inventory order. Returns the groups in order of
    first appearance, each ``{'name': 'G1', 'key', 'canary', 'members', 'inputs'}``; the canary is the
    first member whose N is already cached (``cached``), else the first member. A host without inputs
    is a group of its own (it probes itself).
``describe(group)``
    One line for people (the plan's and the deploy's output).
``take_from_canary(host, group, own, canary)``
    What a host of a probe group takes from its canary on deploy (the action ``probe_group``): the canary's N
    (source ``group``, with this host's own fingerprints) when it has none of its own, and the canary's M when the
    inputs that change M are the canary's.
``plan_groups(rows)``
    The groups plan.yml shows, from each host's plan (its inputs of N and the GPU kind N is predicted
    for; the hardware itself is only known on the host).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import canonical_json, sha256_bytes
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.mamba_clamp import group_blocks

# What identifies one device rather than its kind: left out of a group's hardware.
DEVICE_IDENTITY = ("index", "uuid")


def group_hardware(hardware):
    """The hardware by kind (no GPU index or UUID); None stays None."""
    if not isinstance(hardware, dict):
        return hardware
    out = copy.deepcopy(hardware)
    if isinstance(out.get("gpus"), list):
        out["gpus"] = [dict((k, v) for k, v in gpu.items() if k not in DEVICE_IDENTITY) for gpu in out["gpus"]]
    return out


def group_inputs(inputs):
    """The fingerprint inputs that make two hosts print the same N (no probe mode, hardware by kind)."""
    out = dict((k, v) for k, v in (inputs or {}).items() if k != "probe_mode")
    out["hardware"] = group_hardware(out.get("hardware"))
    return out


def group_key(inputs):
    """sha256 hex of :func:`group_inputs`."""
    return sha256_bytes(canonical_json(group_inputs(inputs)).encode("utf-8"))


def form_groups(hosts, cached=(), per_group=True):
    """The hardware groups of ``hosts`` (see the module docstring); ``per_group`` false: each host a group of its
    own (deploy.yml's ``fleet_probe_per_group: false``, every host probes on its own)."""
    cached = set(cached or ())
    groups, by_key = [], {}
    for host, inputs in hosts:
        key = group_key(inputs) if inputs and per_group else None
        if key is None or key not in by_key:
            group = {"name": "G%d" % (len(groups) + 1), "key": key, "canary": host, "members": [],
                     "inputs": group_inputs(inputs) if inputs else None}
            groups.append(group)
            if key is not None:
                by_key[key] = group
        group = by_key[key] if key is not None else groups[-1]
        group["members"].append(host)
    for group in groups:
        first_cached = [h for h in group["members"] if h in cached]
        if first_cached:
            group["canary"] = first_cached[0]
        group["members"] = [group["canary"]] + [h for h in group["members"] if h != group["canary"]]
    return groups


def describe(group):
    """One line for people: the group, its size, where it probes and who takes that N."""
    others = group["members"][1:]
    shown = ", ".join(others[:5]) + (" and %d more" % (len(others) - 5) if len(others) > 5 else "")
    return "probe group %s: %d host(s), probed on %s%s" % (
        group["name"], len(group["members"]), group["canary"], ", taken by " + shown if others else "")


def take_from_canary(host, group, own, canary):
    """The facts a host of ``group`` takes from its canary: ``{'vllm_block_size', 'vllm_block_size_probe'}`` when it
    has no N of its own and the canary has one, and ``vllm_mamba_blocks`` when ``mamba_clamp.group_blocks``
    gives it the canary's M (or keeps an M the host was given before). ``own`` and ``canary``: each host's
    ``vllm_block_size``, ``vllm_block_size_probe``, ``__vllm_server_probe_inputs`` (the probe's inputs, read without
    launching), ``vllm_mamba_blocks`` and ``mamba_inputs`` (its plan's ``derived.mamba_inputs``)."""
    facts, probe = {}, own.get('vllm_block_size_probe')
    if own.get('vllm_block_size') is None and host != group['canary'] and canary.get('vllm_block_size') is not None:
        inputs = own.get('__vllm_server_probe_inputs') or {}
        probe = dict(canary.get('vllm_block_size_probe') or {}, source='group', changed=False, group=group['name'],
                     canary=group['canary'], fingerprint=inputs.get('fingerprint'),
                     service_fingerprint=inputs.get('service_fingerprint'), inputs=inputs.get('inputs'))
        facts.update(vllm_block_size=canary['vllm_block_size'], vllm_block_size_probe=probe)
    blocks = group_blocks(own.get('vllm_mamba_blocks'), probe, canary.get('vllm_mamba_blocks'),
                          canary.get('mamba_inputs'), own.get('mamba_inputs'), group)
    if blocks is not None:
        facts['vllm_mamba_blocks'] = blocks
    return facts


def plan_key(row):
    """What plan.yml groups by: the host's inputs of N and the GPU kind and count it is planned for."""
    inputs = dict(row.get("n_inputs") or {})
    inputs["gpu_kind"] = row.get("gpu_kind")
    inputs["gpus"] = row.get("gpus")
    return sha256_bytes(canonical_json(inputs).encode("utf-8"))


def plan_groups(rows):
    """{host: group name} and the groups ({'name', 'canary', 'members'}) of plan.yml's rows."""
    groups = form_groups([(row["host"], {"plan": plan_key(row)}) for row in rows])
    names = dict((host, group["name"]) for group in groups for host in group["members"])
    return names, [{"name": g["name"], "canary": g["canary"], "members": g["members"]} for g in groups]
