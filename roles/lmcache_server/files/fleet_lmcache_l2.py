# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start ``lmcache server`` with the L2 adapter of the host's pool when its store answers, without it otherwise.

Usage: <venv>/bin/python <venv>/bin/fleet-lmcache-l2 server <lmcache server arguments...>

LMCache 0.5.6 refuses to start ("Application startup failed") when the store of a ``valkey`` L2 adapter
cannot be reached, and vLLM's unit requires the LMCache unit: a store that is down would stop serving at the
next restart of the host's services. So the adapter JSON (with the store's password) comes from the
environment (LMCACHE_FLEET_L2_ADAPTER, from the unit's 0600 environment file) and is added only when one of
its startup nodes accepts a TCP connection; otherwise LMCache starts with its L1 alone and says so in the
journal (restart the unit once the store is back). LMCache runs in this process: the JSON never appears on a
command line, and it is removed from the environment before LMCache starts.
"""

import json
import os
import socket
import sys

ADAPTER_ENV = 'LMCACHE_FLEET_L2_ADAPTER'
CONNECT_TIMEOUT_S = 3.0


def nodes(adapter):
    """(host, port) of every startup node of a valkey adapter JSON object."""
    found = []
    for item in str(adapter.get('startup_nodes') or '').split(','):
        host, _sep, port = item.strip().rpartition(':')
        if host and port.isdigit():
            found.append((host.strip('[]'), int(port)))
    return found


def reachable(addresses, timeout=CONNECT_TIMEOUT_S):
    """The first node that accepts a TCP connection, or None."""
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return (host, port)
        except OSError:
            continue
    return None


def arguments(argv, raw):
    """LMCache's arguments: ``argv``, plus ``--l2-adapter <raw>`` when its store answers."""
    if not raw:
        return list(argv), None
    addresses = nodes(json.loads(raw))
    if reachable(addresses) is None:
        return list(argv), ('fleet-lmcache-l2: no store of the pool answers (%s); starting LMCache without the '
                            'shared L2 cache, serving from its L1 and prefill; restart this unit once the store '
                            'is back' % ', '.join('%s:%d' % a for a in addresses))
    return list(argv) + ['--l2-adapter', raw], None


def main():
    raw = os.environ.pop(ADAPTER_ENV, '')
    args, warning = arguments(sys.argv[1:], raw)
    if warning:
        sys.stderr.write(warning + '\n')
        sys.stderr.flush()
    from lmcache.cli.main import main as lmcache_main
    # LMCache 0.5.3's main() takes no arguments and reads sys.argv; 0.5.6's main(argv=None) reads it too.
    sys.argv = ['lmcache'] + args
    return lmcache_main()


if __name__ == '__main__':
    sys.exit(main())
