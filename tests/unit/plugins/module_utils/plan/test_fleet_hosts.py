# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet_hosts: one machine under two inventory names, a host variable that cannot be templated."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_hosts import (
    duplicate_hosts,
    machine_key,
    template_error,
)


def entry(host, address=None, port=None, connection="ssh"):
    return {"host": host, "address": address, "port": port, "connection": connection}


@pytest.mark.parametrize("first, second", [
    (("a", "10.0.0.1"), ("b", "10.0.0.1")),
    (("a", "GPU-01.Example.Internal."), ("b", "gpu-01.example.internal")),
    (("a", "fd00::13"), ("b", "[fd00:0:0:0:0:0:0:13]")),
    (("a", "10.0.0.1", None), ("b", "10.0.0.1", "22")),
    (("gpu-01", None), ("b", "gpu-01")),
])
def test_one_machine_under_two_names(first, second):
    errors = duplicate_hosts([entry(*first), entry(*second)])
    names = sorted([first[0], second[0]])
    assert len(errors) == 1, errors
    assert errors[0].startswith("hosts %s and %s reach one machine, ansible_host=" % tuple(names)), errors
    assert "remove all but one of them from the inventory, or set each one's own ansible_host" in errors[0]


def test_three_names_and_the_local_connection():
    errors = duplicate_hosts([entry("c", "h"), entry("a", "h"), entry("b", "h"),
                              entry("x", connection="local"), entry("y", connection="ansible.builtin.local")])
    assert errors == [
        "hosts a, b and c reach one machine, ansible_host=h port 22: it would be deployed, probed and removed once "
        "per name; remove all but one of them from the inventory, or set each one's own ansible_host",
        "hosts x and y reach one machine, this control node (ansible_connection=local): it would be deployed, "
        "probed and removed once per name; remove all but one of them from the inventory, or set each one's own "
        "ansible_host",
    ]


@pytest.mark.parametrize("entries", [
    [entry("a", "10.0.0.1"), entry("b", "10.0.0.2")],
    [entry("a", "10.0.0.1"), entry("b", "10.0.0.1", 2222)],
    [entry("a", "c1", connection="containers.podman.podman"), entry("b", "c2", connection="containers.podman.podman")],
])
def test_distinct_machines_pass(entries):
    assert duplicate_hosts(entries) == []


def test_machine_key_defaults():
    assert machine_key("h") == ("network", "h", 22)
    assert machine_key("h", "::0001", connection="ansible.builtin.ssh") == ("network", "::1", 22)
    assert machine_key("h", connection="containers.podman.podman") == ("containers.podman.podman", "h", None)


def test_template_error_names_host_variable_and_fix():
    assert template_error("gpu-01", "vllm_server_port", "'nope' is undefined\nmore detail") == (
        "host gpu-01: vllm_server_port cannot be templated: 'nope' is undefined; define what it refers to for "
        "this host, or fix the expression")
