# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers of the rule tests (test_fleet_rules.py, test_host_plan.py): one host's settings and its messages."""

from __future__ import annotations

HOST = 'gpu-03'
GOOD = {'vllm_server_model': 'Qwen/Qwen3.6-27B'}


def settings(**overrides):
    merged = dict(GOOD)
    merged.update(overrides)
    return merged


def only(errors, variable):
    """The messages that name ``variable=``."""
    return [error for error in errors if '%s=' % variable in error]


def assert_message(message, *parts):
    assert message.startswith('host %s: ' % HOST), message
    assert '; ' in message, message
    for part in parts:
        assert part in message, (part, message)
