# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until an HTTP endpoint answers 200 (run by systemd as ExecStartPost=).

Usage: <venv>/bin/python <venv>/bin/fleet-wait-ready URL TIMEOUT_SECONDS

One copy serves both roles: the internal role common installs it for lmcache_server
and vllm_server (tasks_from: helper). It is run with the venv's interpreter, so it
needs no shebang and no executable bit.

Exits 0 once URL answers 200, 1 when TIMEOUT_SECONDS pass first or when the
service's main process (systemd's $MAINPID) is gone, so ``systemctl start``
only succeeds for a server that really answers.
"""

import os
import sys
import time
import urllib.error
import urllib.request


def main_process_alive():
    pid = os.environ.get('MAINPID', '')
    if not pid.isdigit():
        return True
    return os.path.exists('/proc/%s' % pid)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write('usage: fleet-wait-ready URL TIMEOUT_SECONDS\n')
        return 2
    url, timeout = argv[1], float(argv[2])
    deadline = time.monotonic() + timeout
    last = 'no answer yet'
    while time.monotonic() < deadline:
        if not main_process_alive():
            sys.stderr.write('fleet-wait-ready: the main process exited before %s answered\n' % url)
            return 1
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    print('fleet-wait-ready: %s answered 200' % url)
                    return 0
                last = 'HTTP %d' % response.status
        except urllib.error.HTTPError as exc:
            last = 'HTTP %d' % exc.code
        except (OSError, ValueError) as exc:
            last = str(exc)
        time.sleep(2)
    sys.stderr.write('fleet-wait-ready: %s did not answer 200 within %d s (last: %s)\n' % (url, timeout, last))
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
