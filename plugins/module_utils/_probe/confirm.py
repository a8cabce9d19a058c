# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``block_size_probe`` with ``expected``: the host's own N against the N its probe group gave it.

A host that took its group's N started its service with flags made for that N. The module then answers from this
host's own sources only (its cache, else the journal of its running service started with the same inputs; nothing
is launched beside the service), caches the answer under this host's fingerprint as any answer, and compares:
``confirmed`` (the same N), ``differs`` (another N: the caller stops the new service, ``stop_service``) or
``unconfirmed`` (no answer without launching vLLM). The group's facts stay: no ``ansible_facts`` are returned."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def label(expected):
    """Who took the N from whom, for the messages: ``host H (group G, canary C)``."""
    return "host %s (group %s, canary %s)" % tuple(expected.get(key) or "?" for key in ("host", "group", "canary"))


def confirmation(expected, answer, note=None):
    """``{'outcome', 'message', 'stop_service', 'expected_block_size', 'block_size', 'source'}``.

    ``expected``: the module's ``expected`` option; ``answer``: the first source's answer (None when no source had
    one); ``note``: why the journal gave nothing (the request's ``journal_note``)."""
    given, who = int(expected["block_size"]), label(expected)
    own = (answer or {}).get("vllm_block_size")
    out = {"expected_block_size": given, "block_size": own, "source": (answer or {}).get("source"),
           "stop_service": False}
    if own is None:
        why = (answer or {}).get("reason") or note or "no cached N and no journal of the running service"
        return dict(out, outcome="unconfirmed",
                    message="%s: N=%s from the canary, not confirmed from the service: %s" % (who, given, why))
    if int(own) == given:
        return dict(out, outcome="confirmed", message="%s: the service confirms the canary's N=%s" % (who, given))
    return dict(out, outcome="differs", stop_service=True, message=(
        "%s: its service reports N=%s, the canary's N=%s; its new service is stopped and its previous units are "
        "put back (never left running with flags made for another N); its hardware or inputs differ from the "
        "canary's in a way the fingerprint does not see: its own N is cached now, and the next deploy (--limit %s) "
        "plans it with its own N" % (who, own, given, expected.get("host") or "<host>")))
