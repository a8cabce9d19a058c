# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bind addresses: which are loopback, which are wildcards, and where a client dials a server bound to one.

One rule for every server the collection writes (vLLM, LMCache, the KV store and its exporter, the router): a
wildcard bind is reached on loopback from the same host (``::1`` for an IPv6 wildcard) and on the host's own
address from another host. Standard library only: host modules ship this file.
"""

from __future__ import annotations

import ipaddress


def is_loopback(host):
    """True for a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    text = str(host or '').strip().strip('[]')
    if text == 'localhost':
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def is_wildcard(host):
    """True for a bind to every address: empty, ``*``, and every spelling of the IPv4 or IPv6 unspecified address
    (``0.0.0.0``, ``::``, ``[::]``, ``0:0:0:0:0:0:0:0``, ``::0``, ``::ffff:0.0.0.0``)."""
    text = str(host or '').strip()
    if text in ('', '*'):
        return True
    try:
        address = ipaddress.ip_address(text.strip('[]'))
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_unspecified


def url_host(host):
    """The address a client on the same host dials for a server bound to ``host``, as written in a URL
    (wildcard binds, see :func:`is_wildcard`, are reached on loopback: IPv6 ones on ::1; IPv6 in brackets)."""
    text = str(host or '').strip()
    if is_wildcard(text):
        text = '::1' if ':' in text else '127.0.0.1'
    return _bracketed(text)


def local_address(host):
    """:func:`url_host` without brackets: the address a client on the same host passes to ``-h`` or a socket."""
    return url_host(host).strip('[]')


def remote_address(host, host_address):
    """The address a client on another host dials for a server bound to ``host``: ``host_address`` (how the
    host is reached, e.g. ``ansible_host``) for a wildcard bind, else the bind itself."""
    return host_address if is_wildcard(host) else host


def host_port(host, port):
    """``host:port`` as a URL, a listen address or a scrape target writes it (an IPv6 address in brackets); no
    wildcard translation: pass :func:`local_address` or :func:`remote_address` of a bind to dial it."""
    return '%s:%s' % (_bracketed(str(host).strip()), port)


def _bracketed(text):
    """An address as a URL writes it: an IPv6 address in brackets, once."""
    text = text.strip('[]')
    return '[%s]' % text if ':' in text else text
