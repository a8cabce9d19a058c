# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's confirmation of an N a host took from its probe group (``_probe/confirm.py``; the whole module with
the option ``expected``: tests/unit/plugins/modules/test_block_size_probe_cuda.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.confirm import confirmation

GIVEN = {"block_size": 544, "host": "a2", "group": "G1", "canary": "a1"}


def test_the_same_n_is_confirmed():
    ok = confirmation(GIVEN, {"vllm_block_size": 544, "source": "journal"})
    assert ok["outcome"] == "confirmed" and not ok["stop_service"] and ok["source"] == "journal"
    assert ok["message"] == "host a2 (group G1, canary a1): the service confirms the canary's N=544"


def test_another_n_stops_the_service_and_names_both_and_the_limit():
    bad = confirmation(GIVEN, {"vllm_block_size": 560, "source": "journal"})
    assert bad["outcome"] == "differs" and bad["stop_service"] and bad["block_size"] == 560
    assert "host a2 (group G1, canary a1): its service reports N=560, the canary's N=544" in bad["message"]
    assert "--limit a2" in bad["message"]


def test_no_answer_is_unconfirmed_with_the_reason():
    unknown = confirmation(GIVEN, None, "the service has not logged the attention block size (yet)")
    assert unknown["outcome"] == "unconfirmed" and not unknown["stop_service"] and unknown["block_size"] is None
    assert "N=544 from the canary, not confirmed from the service: the service has not logged" in unknown["message"]
    skipped = confirmation(GIVEN, {"outcome": "skipped", "reason": "no cached block size"})
    assert skipped["outcome"] == "unconfirmed" and skipped["message"].endswith("no cached block size")
