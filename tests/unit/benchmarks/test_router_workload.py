# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workload and the figures of benchmarks/router_policy_benchmark.py (benchmarks/router_workload.py): each turn
resends the conversation so far behind one shared system prompt, the prompts are the same on every run, and the
percentiles and rates come from the requests that were answered."""

from __future__ import annotations

import pytest


@pytest.fixture(scope='module')
def workload(repo_script):
    return repo_script('benchmarks/router_workload.py')


def test_each_turn_resends_the_conversation_so_far_after_one_system_prompt(workload):
    sessions = workload.sessions(3, 4, system_chars=300, user_chars=50, reply_chars=20)
    assert [len(turns) for turns in sessions] == [4, 4, 4]
    system = sessions[0][0].split('\nUser')[0]
    assert len(system) > 300
    for index, turns in enumerate(sessions):
        assert all(t.startswith(system + '\nUser %d.0: ' % index) for t in turns)
        for earlier, later in zip(turns, turns[1:]):
            assert later.startswith(earlier) and len(later) > len(earlier) + 50
        assert all(t.endswith('\nAssistant:') for t in turns)
    # another session shares the system prompt only
    assert not sessions[1][1].startswith(sessions[0][0])
    assert workload.sessions(3, 4, 300, 50, 20) == sessions
    assert workload.sessions(3, 4, 300, 50, 20, seed=8) != sessions


@pytest.mark.parametrize('values, fraction, expected', [
    ([], 0.5, None), ([None, None], 0.5, None), ([3.0], 0.95, 3.0),
    ([1, 2, 3, 4], 0.5, 2), ([5, 1, 4, 2, 3], 0.5, 3), (list(range(1, 21)), 0.95, 19), (list(range(1, 21)), 1.0, 20)])
def test_nearest_rank_percentile(workload, values, fraction, expected):
    assert workload.percentile(values, fraction) == expected


def test_latency_counts_failures_and_rates_from_answered_requests(workload):
    rows = [{'prompt_tokens': 100, 'ttft_s': 0.2, 'total_s': 1.0}, {'prompt_tokens': 300, 'ttft_s': 0.4, 'total_s': 1.0},
            {'prompt_tokens': 500, 'error': 'HTTPError: HTTP Error 503'}]
    got = workload.latency(rows, 2.0)
    assert got == {'requests': 3, 'failed': 1, 'ttft_p50_s': 0.2, 'ttft_p95_s': 0.4, 'wall_s': 2.0,
                   'requests_per_s': 1.0, 'prompt_tokens_per_s': 200.0}
