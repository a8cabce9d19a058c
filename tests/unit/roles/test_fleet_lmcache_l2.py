# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/lmcache_server/files/fleet_lmcache_l2.py: the L2 adapter only when a store of the pool answers."""

from __future__ import annotations

import json
import socket

import pytest


@pytest.fixture
def launcher(repo_script):
    return repo_script('roles/lmcache_server/files/fleet_lmcache_l2.py')


def adapter(port):
    return json.dumps({'type': 'valkey', 'startup_nodes': '127.0.0.1:%d' % port, 'key_prefix': 'p'})


def test_the_adapter_is_added_when_the_store_answers(launcher):
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    try:
        raw = adapter(listener.getsockname()[1])
        args, warning = launcher.arguments(['server', '--port', '5555'], raw)
        assert args == ['server', '--port', '5555', '--l2-adapter', raw]
        assert warning is None
    finally:
        listener.close()


def test_without_a_store_lmcache_starts_with_its_l1_alone(launcher):
    probe = socket.socket()
    probe.bind(('127.0.0.1', 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    args, warning = launcher.arguments(['server'], adapter(port))
    assert args == ['server']
    assert warning == ('fleet-lmcache-l2: no store of the pool answers (127.0.0.1:%d); starting LMCache without the '
                       'shared L2 cache, serving from its L1 and prefill; restart this unit once the store is back'
                       % port)


def test_no_pool_no_adapter(launcher):
    assert launcher.arguments(['server', '--x'], '') == (['server', '--x'], None)


def test_cluster_nodes_are_all_tried(launcher):
    assert launcher.nodes({'startup_nodes': 'a:1, b:2,[::1]:3'}) == [('a', 1), ('b', 2), ('::1', 3)]


def test_main_runs_lmcache_with_its_arguments_in_sys_argv(launcher, monkeypatch):
    """LMCache 0.5.3's ``main()`` takes no argument and reads sys.argv (0.5.6's ``main(argv=None)`` as well): the
    launcher calls it so. The stand-in module below has 0.5.3's signature (no LMCache is imported here)."""
    import sys
    import types
    seen = []

    def main_053():
        seen.append(list(sys.argv))
        return 0

    fake = types.ModuleType('lmcache.cli.main')
    fake.main = main_053
    for name in ('lmcache', 'lmcache.cli'):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, 'lmcache.cli.main', fake)
    monkeypatch.setattr(sys, 'argv', ['fleet-lmcache-l2', 'server', '--port', '5555'])
    monkeypatch.delenv('LMCACHE_FLEET_L2_ADAPTER', raising=False)
    assert launcher.main() == 0
    assert seen == [['lmcache', 'server', '--port', '5555']]
