# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test double of a vLLM OpenAI server, for the router's routing logic only (no model runs here).

    python openai_backend_double.py PORT NAME LOGFILE [DELAY]

Answers ``/health``, ``/metrics`` (vLLM's ``vllm:num_requests_running``: the completions in flight, and
``vllm:num_requests_waiting`` 0), ``/v1/models`` and ``/v1/completions`` / ``/v1/chat/completions`` (JSON, not streamed) with
a body that names the backend (``NAME``), and appends one JSON line per request to ``LOGFILE``: the path, the
``Authorization`` header it received and the backend's name. ``/health`` answers 503 while the file
``LOGFILE.down`` exists (a worker that is taken out). ``DELAY`` (seconds, default 0): how long a completion takes
(a request in flight while the worker is taken out of its router).
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_handler(name, log_path, delay=0.0):
    in_flight = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def _record(self):
            with open(log_path, 'a') as handle:
                handle.write(json.dumps({'path': self.path, 'backend': name,
                                         'authorization': self.headers.get('Authorization')}) + '\n')

        def _answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._record()
            if self.path.startswith('/health'):
                down = os.path.exists(log_path + '.down')
                self._answer(503 if down else 200, {'status': 'down' if down else 'ok'})
            elif self.path.startswith('/metrics'):
                with lock:
                    running = in_flight[0]
                data = ('# TYPE vllm:num_requests_running gauge\n'
                        'vllm:num_requests_running{engine="0",model_name="double-model"} %d.0\n'
                        '# TYPE vllm:num_requests_waiting gauge\n'
                        'vllm:num_requests_waiting{engine="0",model_name="double-model"} 0.0\n' % running).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'text/plain; version=0.0.4')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif self.path.startswith('/v1/models'):
                self._answer(200, {'object': 'list', 'data': [{'id': 'double-model', 'object': 'model'}]})
            else:
                self._answer(404, {'error': 'not found'})

        def do_POST(self):
            length = int(self.headers.get('Content-Length') or 0)
            self.rfile.read(length)
            self._record()
            if self.path.startswith('/v1/'):
                with lock:
                    in_flight[0] += 1
                try:
                    time.sleep(delay)
                finally:
                    with lock:
                        in_flight[0] -= 1
                self._answer(200, {'id': 'cmpl-double', 'object': 'text_completion', 'model': 'double-model',
                                   'choices': [{'index': 0, 'text': name, 'finish_reason': 'stop',
                                                'message': {'role': 'assistant', 'content': name}}],
                                   'usage': {'prompt_tokens': 1, 'completion_tokens': 1, 'total_tokens': 2}})
            else:
                self._answer(404, {'error': 'not found'})

    return Handler


def main(argv):
    port, name, log_path = int(argv[1]), argv[2], argv[3]
    delay = float(argv[4]) if len(argv) > 4 else 0.0
    server = ThreadingHTTPServer(('127.0.0.1', port), make_handler(name, log_path, delay))
    server.serve_forever()


if __name__ == '__main__':
    main(sys.argv)
