# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A bounded workload through a router while deploy.yml restarts its workers (molecule scenario default).

Runs on the router's host: one client sends short completions through the router, one every 2 s (a request stream
that leaves the CPU of the test machine to the restarting hosts), until the
stop file exists or MAX_SECONDS have passed, and between requests reads the router's /list_workers. Writes OUT (JSON):
requests answered 200 and failed (with the first errors), and each change of the router's worker list with the
request count at which it was seen, so verify.yml can tell that each worker was taken out and put back.

usage: router_load.py ROUTER_URL MODEL OUT STOP_FILE MAX_SECONDS
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request


def call(url, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read()


def workers(router):
    try:
        return sorted(json.loads(call(router + '/list_workers', timeout=10)[1]).get('urls', []))
    except (OSError, ValueError, urllib.error.URLError) as exc:
        return ['error: %s' % exc]


def send(router, model, number):
    body = {'model': model, 'prompt': 'request %d through the router: ' % number + 'a b c ' * 20,
            'max_tokens': 2, 'temperature': 0}
    try:
        status, raw = call(router + '/v1/completions', body)
        return status == 200 and bool(json.loads(raw).get('choices')), 'HTTP %s' % status
    except urllib.error.HTTPError as exc:
        return False, 'HTTP %s: %s' % (exc.code, exc.read()[:200])
    except (OSError, ValueError, urllib.error.URLError) as exc:
        return False, str(exc)


def main(router, model, out, stop_file, max_seconds):
    result = {'ok': 0, 'failed': 0, 'errors': [], 'worker_lists': [], 'seconds': 0.0}
    start = time.monotonic()
    last = None
    number = 0
    while not os.path.exists(stop_file) and time.monotonic() - start < float(max_seconds):
        listed = workers(router)
        if listed != last:
            result['worker_lists'].append({'after_requests': number, 'at_s': round(time.monotonic() - start, 1),
                                           'workers': listed})
            last = listed
        number += 1
        ok, what = send(router, model, number)
        result['ok' if ok else 'failed'] += 1
        if not ok and len(result['errors']) < 10:
            result['errors'].append('request %d: %s' % (number, what))
        with open(out + '.progress', 'w') as handle:
            handle.write('%d %d\n' % (result['ok'], result['failed']))
        time.sleep(2.0)
    result['seconds'] = round(time.monotonic() - start, 1)
    result['stopped_by'] = 'stop file' if os.path.exists(stop_file) else 'time limit'
    with open(out, 'w') as handle:
        json.dump(result, handle, indent=1)


if __name__ == '__main__':
    main(*sys.argv[1:6])
