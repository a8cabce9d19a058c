# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wall time and peak memory of the ways to learn vLLM's hybrid block size N.

Side by side in one run on this machine (one vLLM at a time):

  import  ``python -c "import vllm"`` with the venv's python, and ``import-serve``: the modules
          ``vllm serve`` imports before parsing its arguments (vllm itself imports lazily);
          the floor of any launch (the API server, EngineCore and Worker processes each import)
  plain   the seeds' way: ``vllm serve MODEL --mamba-cache-mode align --enable-prefix-caching
          --max-model-len 8192 --gpu-memory-utilization 0.5 --load-format dummy``, log grepped
          until the line, then the process group is killed
  full    the block_size_probe module (shrink=never, force=true, launcher=engine: vLLM's engine
          built in one process from the same command line), through ``ansible-playbook``
  shrunk  the block_size_probe module (shrink=auto, force=true, launcher=engine): 4 layers,
          vocabulary 4096 and MLP 512 via --hf-overrides
  serve-full / serve-shrunk   the same with launcher=serve (a plain ``vllm serve`` of the probe's
          command line: API server, EngineCore and Worker processes)
  cache   the module again: answered from the cache

for the Qwen3.5-0.8B configuration (every case) and the Qwen3.6-27B configuration (plain,
shrunk, cache: its dummy weights need ~54 GB, this machine has 24 GiB). A launch is capped
by --timeout and by a memory watchdog that kills the whole tree when its summed RSS passes
--rss-limit-gib (default 18, lowered to leave 3 GiB of the machine's available memory at the
start) or when the machine's available memory falls under 1.5 GiB (other work may grow too), so
the 27B plain launch cannot take the machine down; the table says how each launch ended.

Peak memory is the sum of RSS over the whole process tree (ansible-playbook, the module,
vLLM and every child, shared pages counted once per process), sampled every 0.1 s.

Usage:
  python benchmarks/probe_benchmark.py [--venv DIR] [--models 0.8b,27b] [--cases plain,full,shrunk,cache]
                                       [--timeout S] [--rss-limit-gib G] [--out benchmarks/results]
Writes probe-<time>.json, probe-<time>.md and probe-<time>.png (drawn with the vLLM venv's
Pillow) to --out and prints the Markdown table.
"""

from __future__ import absolute_import, division, print_function

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from bench_common import DEFAULT_VENV, GIB, fmt, load_font, machine, meminfo, plot_with_venv

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))

from fleet_collection import expose_collection  # noqa: E402
from fleet_probe_play import ProbePlay  # noqa: E402

expose_collection()  # run without scripts/env.sh too

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import process  # noqa: E402

MODELS = {
    "0.8b": ("Qwen3.5-0.8B", os.path.join(REPO, "tests", "fixtures", "models", "qwen3.5-0.8b")),
    "27b": ("Qwen3.6-27B", os.path.join(REPO, "tests", "fixtures", "models", "qwen3.6-27b")),
}
DEFAULT_CASES = {"0.8b": ["plain", "serve-full", "full", "serve-shrunk", "shrunk", "cache"],
                 "27b": ["serve-shrunk", "shrunk", "cache"]}
# case -> block_size_probe arguments
MODULE_CASES = {
    "full": {"shrink": "never", "force": True, "launcher": "engine"},
    "shrunk": {"shrink": "auto", "force": True, "launcher": "engine"},
    "serve-full": {"shrink": "never", "force": True, "launcher": "serve"},
    "serve-shrunk": {"shrink": "auto", "force": True, "launcher": "serve"},
    "cache": {"shrink": "auto"},
}
SET_BLOCK_RE = re.compile(r"Setting attention block size to (\d+) tokens")
MIB = 2 ** 20
# the memory watchdog also fires when the whole machine runs this low (other work runs too)
MIN_AVAILABLE = int(1.5 * GIB)


class Sampler(threading.Thread):
    """Peak summed RSS of root's tree; kills the tree above rss_limit bytes."""

    def __init__(self, root, interval=0.1, rss_limit=None):
        super(Sampler, self).__init__()
        self.daemon = True
        self.root = root
        self.interval = interval
        self.rss_limit = rss_limit
        self.peak = 0
        self.peak_procs = 0
        self.killed_at = None
        self.kill_reason = None
        self.started = time.time()
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            table = process.process_table()
            members = process.with_sessions(process.process_tree(self.root, table), table)
            rss = sum(table[p].rss for p in members if p in table)
            if rss > self.peak:
                self.peak, self.peak_procs = rss, len(members)
            avail = mem_available() if self.rss_limit else None
            low = avail is not None and avail < MIN_AVAILABLE
            if self.rss_limit and (rss > self.rss_limit or low) and self.killed_at is None:
                self.killed_at = time.time() - self.started
                self.kill_reason = ("tree RSS %.1f GiB > %.1f GiB" % (rss / float(GIB), self.rss_limit / float(GIB))
                                    if rss > self.rss_limit else
                                    "machine's available memory %.1f GiB < %.1f GiB (tree RSS %.1f GiB)"
                                    % (avail / float(GIB), MIN_AVAILABLE / float(GIB), rss / float(GIB)))
                for sid in set(table[p].sid for p in members if p in table) - {os.getsid(0)}:
                    process.kill_session(sid)
                process.kill_pids(members)
            time.sleep(self.interval)

    def stop(self):
        self._halt.set()
        self.join()


def mem_available():
    return meminfo().get("MemAvailable")


def oom_kills():
    """The kernel's oom_kill counter (to tell an OOM kill from other deaths)."""
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (IOError, OSError):
        pass
    return None


def last_error(text):
    for line in reversed(text.strip().splitlines()):
        if re.search(r"Error|Exception|error:|Killed", line):
            return line.strip()[:300]
    return ""


IMPORTS = {
    # what the issue calls vLLM's import time
    "import": "import vllm",
    # what `vllm serve` imports before it parses its arguments (vllm itself imports lazily)
    "import-serve": "import vllm.entrypoints.openai.api_server",
}


def case_import(venv, case="import"):
    """Wall time of an import with the venv's python (the floor of every launch;
    vLLM's API server, EngineCore and Worker processes each import again)."""
    python = os.path.join(venv, "bin", "python")
    t0 = time.time()
    proc = subprocess.Popen([python, "-c", IMPORTS[case]], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    sampler = Sampler(proc.pid)
    sampler.start()
    out = proc.communicate()[0]
    wall = time.time() - t0
    sampler.stop()
    return {"case": case, "wall_s": round(wall, 2), "peak_rss_mib": sampler.peak // MIB,
            "peak_procs": sampler.peak_procs, "ok": proc.returncode == 0,
            "what": IMPORTS[case] if proc.returncode == 0 else last_error(out.decode("utf-8", "replace"))}


def case_plain(venv, model, log_dir, label, timeout, rss_limit):
    """The seeds' way: start vllm serve, grep the log, kill."""
    log = os.path.join(log_dir, "plain-%s.log" % label)
    argv = [os.path.join(venv, "bin", "vllm"), "serve", model, "--mamba-cache-mode", "align",
            "--enable-prefix-caching", "--max-model-len", "8192", "--gpu-memory-utilization", "0.5",
            "--load-format", "dummy", "--port", str(process.free_port())]
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
    oom_before = oom_kills()
    t0 = time.time()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    sampler = Sampler(proc.pid, rss_limit=rss_limit)
    sampler.start()
    n = None
    ended = "timeout after %d s" % timeout
    try:
        while time.time() - t0 < timeout:
            with open(log, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            m = SET_BLOCK_RE.search(text)
            if m:
                n = int(m.group(1))
                ended = "printed the line"
                break
            if sampler.killed_at is not None:
                ended = "killed by the memory watchdog (%s) after %.0f s" % (
                    sampler.kill_reason, sampler.killed_at)
                break
            rc = proc.poll()
            if rc is not None:
                oom = oom_kills()
                if oom_before is not None and oom is not None and oom > oom_before:
                    ended = "killed by the kernel's OOM killer (rc %s)" % rc
                else:
                    ended = "vLLM exited with rc %s: %s" % (rc, last_error(text))
                break
            time.sleep(0.2)
        wall = time.time() - t0
    finally:
        process.kill_session(proc.pid)
        proc.wait()
        sampler.stop()
    if n is None and sampler.killed_at is not None and "watchdog" not in ended:
        ended = "killed by the memory watchdog (%s) after %.0f s" % (sampler.kill_reason, sampler.killed_at)
    return {"case": "plain", "n": n, "wall_s": round(wall, 2), "line_s": round(wall, 2) if n else None,
            "peak_rss_mib": sampler.peak // MIB, "peak_procs": sampler.peak_procs, "ok": n is not None,
            "what": ended, "cmd": argv, "log": log}


def case_module(name, venv, model, work, log_dir, label, timeout, rss_limit, **args):
    a = {"model": model, "vllm_executable": os.path.join(venv, "bin", "vllm"),
         "cache_path": os.path.join(work, "cache-%s.fact" % label), "timeout": int(timeout)}
    if name != "cache":
        a["log_path"] = os.path.join(log_dir, "%s-%s.log" % (name, label))
    a.update(args)
    play = ProbePlay(work, a, name="probe-%s-%s" % (name, label))
    t0 = time.time()
    proc = play.popen(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = Sampler(proc.pid, rss_limit=rss_limit)
    sampler.start()
    out, err = proc.communicate()
    wall = time.time() - t0
    sampler.stop()
    res = play.result() or {"failed": True, "msg": (out + err).decode("utf-8", "replace")[-2000:]}
    ok = not res.get("failed") and res.get("vllm_block_size") is not None
    if ok:
        what = "%s (%s)" % (res.get("source"), res.get("probe_mode"))
    elif sampler.killed_at is not None:
        what = "killed by the memory watchdog (%s) after %.0f s" % (sampler.kill_reason, sampler.killed_at)
    else:
        what = "failed: %s" % (res.get("msg") or "")[:300]
    if ok and res.get("launcher"):
        what += " via %s" % res["launcher"]
    return {"case": name, "n": res.get("vllm_block_size"), "wall_s": round(wall, 2),
            "launcher": res.get("launcher"), "launcher_fallback": res.get("launcher_fallback"),
            "module_s": res.get("elapsed_s"), "line_s": res.get("line_elapsed_s"),
            "peak_rss_mib": sampler.peak // MIB, "peak_procs": sampler.peak_procs, "ok": ok,
            "what": what, "source": res.get("source"), "probe_mode": res.get("probe_mode"),
            "cmd": res.get("cmd"), "msg": res.get("msg")}


def markdown(rows):
    lines = ["| model | case | N | wall s | module s | line s | peak RSS MiB | procs | load | how it ended |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r.get("model", "-"), r["case"], fmt(r.get("n")), fmt(r.get("wall_s"), "%.1f"),
            fmt(r.get("module_s"), "%.2f"), fmt(r.get("line_s"), "%.1f"), fmt(r.get("peak_rss_mib")),
            fmt(r.get("peak_procs")), fmt(r.get("load_before"), "%.1f"),
            (r.get("what") or "").replace("|", "/")))
    return "\n".join(lines)


def _median(values):
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def summary(rows):
    """Ratios the README quotes (medians over --repeat runs)."""
    def row(model, case):
        hits = [r for r in rows if r.get("model") == model and r["case"] == case and r.get("ok")]
        if not hits:
            return None
        out = dict(hits[0])
        for key in ("wall_s", "line_s", "peak_rss_mib", "module_s"):
            vals = [r[key] for r in hits if r.get(key) is not None]
            out[key] = _median(vals) if vals else None
        return out
    out = {}
    imp = row("-", "import")
    imp_serve = row("-", "import-serve")
    for key, (model, _path) in MODELS.items():
        full, shrunk, plain, cache = (row(model, c) for c in ("full", "shrunk", "plain", "cache"))
        s = {}
        if full and shrunk:
            s["shrunk_over_full_peak_rss"] = round(shrunk["peak_rss_mib"] / float(full["peak_rss_mib"]), 2)
            s["shrunk_over_full_wall"] = round(shrunk["wall_s"] / full["wall_s"], 2)
        if plain and shrunk:
            s["shrunk_over_plain_wall"] = round(shrunk["wall_s"] / plain["wall_s"], 2)
        if cache:
            s["cache_module_s"] = cache.get("module_s")
        # the engine launcher against vllm serve: time from the launch to the line
        for mode in ("full", "shrunk"):
            eng, srv = row(model, mode), row(model, "serve-" + mode)
            if eng and eng.get("line_s"):
                if srv and srv.get("line_s"):
                    s["engine_over_serve_line_%s" % mode] = round(eng["line_s"] / srv["line_s"], 2)
                if plain and plain.get("line_s"):
                    s["engine_%s_over_plain_line" % mode] = round(eng["line_s"] / plain["line_s"], 2)
                s["engine_%s_line_s" % mode] = eng["line_s"]
            if srv and srv.get("line_s"):
                s["serve_%s_line_s" % mode] = srv["line_s"]
        if plain and plain.get("line_s"):
            s["plain_line_s"] = plain["line_s"]
        for name, ref in (("import", imp), ("import_serve", imp_serve)):
            if ref and shrunk and shrunk.get("line_s"):
                s["shrunk_line_over_%s" % name] = round(shrunk["line_s"] / ref["wall_s"], 2)
                s["shrunk_line_minus_%s_s" % name] = round(shrunk["line_s"] - ref["wall_s"], 1)
        if s:
            out[model] = s
    return out


# ---------------------------------------------------------------------- plot (Pillow)

def draw_plot(data, path):
    """Two bar charts (wall time, peak RSS) per model and case; needs Pillow."""
    from PIL import Image, ImageDraw  # pylint: disable=import-error
    rows = [r for r in data["rows"] if r.get("wall_s") is not None]
    font = load_font()
    label_w, bar_w, gap, pad, row_h = 330, 340, 250, 20, 26
    width = label_w + 2 * (bar_w + gap) + pad
    height = 90 + row_h * len(rows) + 60
    img = Image.new("RGB", (width, height), "white")
    d = ImageDraw.Draw(img)
    loads = [r["load_before"] for r in rows if r.get("load_before") is not None] or [0.0]
    d.text((pad, 12), "block size N: wall time and peak memory per way (%s, %d cores, 1-min load %.1f-%.1f)" % (
        data["machine"]["node"], data["machine"]["cpus"], min(loads), max(loads)),
        fill="black", font=font)
    colors = {"import": "#999999", "import-serve": "#bbbbbb", "plain": "#d62728", "full": "#ff7f0e", "shrunk": "#2ca02c",
              "serve-full": "#ffbb78", "serve-shrunk": "#98df8a", "cache": "#1f77b4"}
    panels = [("wall time (s)", "wall_s", label_w),
              ("peak RSS of the process tree (GiB)", "peak_rss_mib", label_w + bar_w + gap)]
    for title, key, x0 in panels:
        vals = [(r.get(key) or 0) / (1024.0 if key == "peak_rss_mib" else 1.0) for r in rows]
        vmax = max(vals + [1e-9])
        d.text((x0, 50), title, fill="black", font=font)
        for i, (r, v) in enumerate(zip(rows, vals)):
            y = 80 + i * row_h
            w = int(bar_w * v / vmax)
            d.rectangle([x0, y, x0 + max(w, 1), y + row_h - 8], fill=colors.get(r["case"], "#777777"))
            txt = ("%.1f" % v) if key == "wall_s" else ("%.2f" % v)
            if r["case"] not in IMPORTS and not r.get("ok"):
                what = r.get("what") or ""
                tag = ("OOM-killed" if "OOM" in what else "watchdog" if "watchdog" in what
                       else "timeout" if "timeout" in what else "failed")
                txt += " (no N: %s)" % tag
            d.text((x0 + max(w, 1) + 6, y + 2), txt, fill="black", font=font)
    for i, r in enumerate(rows):
        y = 80 + i * row_h
        label = "%s %s" % (r.get("model", ""), r["case"]) if r.get("model") != "-" else IMPORTS[r["case"]]
        if r.get("n"):
            label += "  N=%s" % r["n"]
        d.text((pad, y + 2), label, fill="black", font=font)
    d.text((pad, height - 40), "plain = seeds' vllm serve; full/shrunk = block_size_probe's engine launcher, serve-* its "
           "vllm serve launcher, cache (ansible-playbook); bars without N did not get the line", fill="#444444", font=font)
    img.save(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--venv", default=DEFAULT_VENV)
    ap.add_argument("--models", default="0.8b,27b")
    ap.add_argument("--cases", default=None,
                    help="cases for every model (default 0.8b: plain,full,shrunk,cache; 27b: plain,shrunk,cache)")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--rss-limit-gib", type=float, default=18.0)
    ap.add_argument("--no-import", action="store_true", help="skip the 'import vllm' measurement")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run every case this many times, interleaved (the summary takes medians)")
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results"))
    ap.add_argument("--plot", nargs=2, metavar=("JSON", "PNG"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plot:
        with open(args.plot[0]) as f:
            draw_plot(json.load(f), args.plot[1])
        return

    if not os.access(os.path.join(args.venv, "bin", "vllm"), os.X_OK):
        sys.exit("no vllm in %s" % args.venv)
    avail = mem_available()
    rss_limit = int(args.rss_limit_gib * GIB)
    if avail and rss_limit > avail - 3 * GIB:
        rss_limit = max(int(avail - 3 * GIB), 4 * GIB)
    work = tempfile.mkdtemp(prefix="probe-bench-")
    log_dir = os.path.join(work, "logs")
    os.makedirs(log_dir)
    load_before = os.getloadavg()
    started = time.time()
    rows = []

    def record(row, model):
        row["model"] = model
        rows.append(row)
        print("%s %s: %s" % (model, row["case"], json.dumps({k: row.get(k) for k in (
            "n", "wall_s", "module_s", "line_s", "peak_rss_mib", "ok", "what", "load_before")})),
            file=sys.stderr)

    if not args.no_import:
        for case in IMPORTS:
            load = os.getloadavg()[0]
            row = case_import(args.venv, case)
            row["load_before"] = load
            record(row, "-")
    for key in [m.strip() for m in args.models.split(",") if m.strip()]:
        if key not in MODELS:
            sys.exit("unknown model %s (one of %s)" % (key, ", ".join(MODELS)))
        name, model = MODELS[key]
        cases = [c.strip() for c in args.cases.split(",")] if args.cases else DEFAULT_CASES[key]
        for case in cases:
            if case != "plain" and case not in MODULE_CASES:
                sys.exit("unknown case %s (plain, %s)" % (case, ", ".join(MODULE_CASES)))
        for rep in range(max(1, args.repeat)):
            for case in cases:
                if case == "cache" and rep:
                    continue
                load = os.getloadavg()[0]
                if case == "plain":
                    row = case_plain(args.venv, model, log_dir, key, args.timeout, rss_limit)
                else:
                    row = case_module(case, args.venv, model, work, log_dir, key, args.timeout, rss_limit,
                                      **MODULE_CASES[case])
                row["load_before"] = load
                row["repeat"] = rep
                record(row, name)
    table = markdown(rows)
    ratios = summary(rows)
    load_after = os.getloadavg()
    if not os.path.isdir(args.out):
        os.makedirs(args.out)
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    base = os.path.join(args.out, "probe-%s" % stamp)
    data = {"machine": machine(mem_available_gib_before=round((avail or 0) / GIB, 1),
                               loadavg_before=load_before, loadavg_after=load_after,
                               busy=load_before[0] > 4 or load_after[0] > 4),
            "venv": args.venv, "rss_limit_gib": round(rss_limit / GIB, 1), "timeout_s": args.timeout,
            "total_s": round(time.time() - started, 1), "rows": rows, "summary": ratios,
            "markdown": table,
            "command": "python benchmarks/probe_benchmark.py " + " ".join(
                a for a in sys.argv[1:])}
    with open(base + ".json", "w") as f:
        json.dump(data, f, indent=2)
    note = ""
    if data["machine"]["busy"]:
        note = ("\n\nThe machine was busy (load average %.1f before, %.1f after, on %d cores): other work ran "
                "at the same time, so times are upper bounds." % (load_before[0], load_after[0], os.cpu_count()))
    with open(base + ".md", "w") as f:
        f.write("# block size N: probe benchmark %s\n\n%s%s\n\nSummary: `%s`\n\nReproduce: `%s`\n" % (
            stamp, table, note, json.dumps(ratios), data["command"]))
    png = plot_with_venv(__file__, args.venv, base + ".json", base + ".png")
    print(table + note)
    print("\nsummary: %s" % json.dumps(ratios))
    print("JSON: %s.json, Markdown: %s.md, plot: %s (logs in %s)" % (base, base, png, log_dir))


if __name__ == "__main__":
    main()
