# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet-wide checks of the inventory itself (pure): one machine listed under two inventory names, and
a host variable that cannot be templated. Used by validate.yml (through the action
``fleet_check`` and the lookup ``host_plan``), so deploy and every day-two playbook refuse
them before any host is contacted."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

# connections that reach a machine over the network, and their default port
NETWORK_CONNECTIONS = {
    "ssh": 22, "ansible.builtin.ssh": 22, "paramiko": 22, "paramiko_ssh": 22,
    "ansible.builtin.paramiko_ssh": 22, "ansible.netcommon.libssh": 22, "libssh": 22,
    "winrm": 5986, "ansible.builtin.winrm": 5986, "psrp": 5986, "ansible.builtin.psrp": 5986,
}
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")
# the host variables that say how a host is reached, and the entry key each one fills
REACH_VARIABLES = (("ansible_host", "address"), ("ansible_port", "port"), ("ansible_connection", "connection"))


def normal_address(address):
    """A host address compared case-insensitively, without a trailing dot or IPv6 brackets, IP
    addresses in their canonical form (``::0001`` is ``::1``)."""
    text = str(address or "").strip().lower().rstrip(".")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).compressed
    except ValueError:
        return text


def machine_key(host, address=None, port=None, connection=None):
    """What identifies the machine a host entry reaches: (transport, address, port)."""
    conn = str(connection or "ssh")
    if conn in LOCAL_CONNECTIONS:
        return ("local", "localhost", None)
    addr = normal_address(address if address not in (None, "") else host)
    if conn in NETWORK_CONNECTIONS:
        default = NETWORK_CONNECTIONS[conn]
        try:
            number = int(port) if port not in (None, "") else default
        except (TypeError, ValueError):
            number = str(port)
        return ("network", addr, number)
    return (conn, addr, None)


def machine_entry(host, host_vars):
    """How the inventory host ``host`` is reached, from its variables: ``{'host', 'address', 'port',
    'connection'}`` (``ansible_host`` defaults to the host's name, ``ansible_connection`` to ssh)."""
    entry = {"host": host, "address": host, "port": None, "connection": "ssh"}
    for name, key in REACH_VARIABLES:
        if name in host_vars:
            entry[key] = host_vars[name]
    return entry


def _names(hosts):
    return hosts[0] if len(hosts) == 1 else "%s and %s" % (", ".join(hosts[:-1]), hosts[-1])


def duplicate_hosts(entries):
    """Errors for inventory hosts that reach one machine. ``entries``: dicts with ``host`` and the
    host's ``ansible_host`` (``address``), ``ansible_port`` (``port``) and ``ansible_connection``
    (``connection``). One error per machine, naming every host that reaches it."""
    groups = {}
    for entry in entries:
        key = machine_key(entry.get("host"), entry.get("address"), entry.get("port"), entry.get("connection"))
        groups.setdefault(key, []).append(str(entry.get("host")))
    errors = []
    for key, hosts in groups.items():
        if len(hosts) < 2:
            continue
        hosts = sorted(hosts)
        if key[0] == "local":
            where = "this control node (ansible_connection=local)"
        else:
            where = "ansible_host=%s" % key[1] + (" port %s" % key[2] if key[2] is not None else "")
        errors.append("hosts %s reach one machine, %s: it would be deployed, probed and removed once per name; "
                      "remove all but one of them from the inventory, or set each one's own ansible_host"
                      % (_names(hosts), where))
    return sorted(errors)


def template_error(host, name, message):
    """The plan error of a host variable that cannot be templated (an undefined variable it refers
    to, a syntax error): validation reports it with every other problem instead of stopping."""
    first = str(message).strip().splitlines()[0] if str(message).strip() else "template error"
    return ("host %s: %s cannot be templated: %s; define what it refers to for this host, or fix the expression"
            % (host, name, first))
