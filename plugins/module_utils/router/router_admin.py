# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm-router's administration API, as measured on 0.1.17 (docs/router.md), and a worker's running requests.

- ``GET /list_workers`` answers ``{"urls": [...]}``.
- ``POST /remove_worker?url=U`` takes U out at once (200, also when U is not a worker); requests in flight on U
  complete.
- ``POST /add_worker?url=U`` waits until U's ``/health`` answers (up to the router's
  ``--worker-startup-timeout-secs``), then adds it (200); 400 when U is already a worker or never became healthy.

No proxy is used: the router is reached on its own host. The API has no authentication (the router's
``--api-key`` is never set by the collection), so no secret is sent.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

try:
    from urllib.parse import quote
    from urllib.request import ProxyHandler, Request, build_opener
except ImportError:  # pragma: no cover - Python 2 targets are not supported
    quote = ProxyHandler = Request = build_opener = None

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import prometheus_text


class RouterUnreachable(Exception):
    """The router did not answer (down, not deployed yet) or answered something else than its API."""


def _open(url, method='GET', timeout=10):
    opener = build_opener(ProxyHandler({}))
    request = Request(url, data=b'' if method == 'POST' else None, method=method)
    try:
        with opener.open(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode('utf-8', 'replace')
    except OSError as exc:
        status = getattr(exc, 'code', None)
        if status is not None:  # an HTTP error status with a body
            return status, exc.read().decode('utf-8', 'replace')
        raise RouterUnreachable('%s: %s' % (url, getattr(exc, 'reason', None) or exc))


def list_workers(router_url, timeout=10):
    """The worker URLs the router routes to."""
    status, body = _open(router_url.rstrip('/') + '/list_workers', timeout=timeout)
    try:
        urls = json.loads(body)['urls'] if status == 200 else None
    except (ValueError, KeyError, TypeError):
        urls = None
    if not isinstance(urls, list):
        raise RouterUnreachable('%s/list_workers answered %s: %s' % (router_url, status, body[:200]))
    return [str(u).rstrip('/') for u in urls]


def set_worker(router_url, worker_url, present, timeout=10):
    """Add (``present``) or remove the worker; returns (ok, the router's answer)."""
    action = 'add_worker' if present else 'remove_worker'
    url = '%s/%s?url=%s' % (router_url.rstrip('/'), action, quote(worker_url, safe=''))
    status, body = _open(url, method='POST', timeout=timeout)
    return status == 200, body.strip()[:300]


def requests_in_flight(metrics_text):
    """vLLM's running plus waiting requests from its ``/metrics`` text (None when neither is there)."""
    samples = prometheus_text.parse(metrics_text or '')
    running = prometheus_text.total(samples, prometheus_text.VLLM_REQUESTS_RUNNING)
    waiting = prometheus_text.total(samples, prometheus_text.VLLM_REQUESTS_WAITING)
    if running is None and waiting is None:
        return None
    return int((running or 0) + (waiting or 0))


def wait_idle(worker_url, timeout, interval=1.0, clock=time.monotonic, sleep=time.sleep):
    """Wait until the worker runs no request (vLLM's metrics); returns (idle, the last count or None)."""
    deadline, count = clock() + timeout, None
    while True:
        try:
            status, body = _open(worker_url.rstrip('/') + '/metrics', timeout=5)
            count = requests_in_flight(body) if status == 200 else None
        except (RouterUnreachable, prometheus_text.PrometheusTextError):
            count = None
        if count is None or count == 0:
            return count is not None, count
        if clock() >= deadline:
            return False, count
        sleep(interval)
