# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one builder of the collection's systemd units (pure function): vLLM's, LMCache's, the KV store's, its
exporter's and the routers' units are its ``[Unit]`` head, their own ``[Service]`` lines and its ``[Install]`` tail.

Every value reaches it quoted already (``systemd_quote``); the caller's ``[Service]`` lines carry the run-as user,
the command and the sandbox of its kind of unit.
"""

from __future__ import annotations


def unit_file(description, documentation, service, after=(), requires=(), start_limit=(300, 5)):
    """The lines of a unit file (after the managed-by comment the templates add).

    ``description``: the ``Description=`` text, quoted for specifiers; ``documentation``: a URL or ``man:`` page;
    ``service``: the ``[Service]`` lines; ``after``: units to start after besides ``network-online.target``;
    ``requires``: units this one needs and stops with (``Requires=`` and ``PartOf=`` each); ``start_limit``:
    ``(StartLimitIntervalSec, StartLimitBurst)``."""
    lines = ['[Unit]',
             'Description=%s' % description,
             'Documentation=%s' % documentation,
             'After=%s' % ' '.join(['network-online.target'] + list(after)),
             'Wants=network-online.target']
    for unit in requires:
        lines += ['Requires=%s' % unit, 'PartOf=%s' % unit]
    lines += ['StartLimitIntervalSec=%d' % start_limit[0], 'StartLimitBurst=%d' % start_limit[1], '', '[Service]']
    return lines + list(service) + ['', '[Install]', 'WantedBy=multi-user.target']
