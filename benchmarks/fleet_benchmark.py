# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet wall time: first deploy and no-op re-run of playbooks/deploy.yml on 1, 3 and 6 sandbox hosts.

For each fleet size, on this machine:

  1. bring up that many sandbox hosts (rootful podman containers with systemd as PID 1, the
     image of scripts/setup-testhosts.sh, through playbooks/sandbox_up.yml) named
     fleet-bench-01 ... on their own podman network fleet-bench; every host serves the hybrid
     tiny model of the sandbox (group fleet_cpu_hybrid: a real probe of N, a real LMCache
     server, the real vLLM CPU build);
  2. first deploy: ``ansible-playbook -i <inventory> playbooks/deploy.yml --forks F`` (F at least
     the number of hosts, so that nothing waits for a fork), timed from start to exit;
  3. no-op re-run: the same command again, timed; the benchmark checks that it changed nothing
     (PLAY RECAP), launched no vLLM (every host's probe cache entry and vLLM InvocationID are
     the ones of the first deploy);
  4. the probe groups (the lines "probe group G<n>" of the first deploy) and the probes that launched vLLM,
     and the probes' time intervals, read back from each host's probe cache (probed_at and
     probe_elapsed_s), show whether they ran in parallel: "overlap" is the largest number of
     probes running at the same moment and "parallelism" the sum of the probe durations over
     the time from the first probe's start to the last probe's end;
  5. remove the hosts (only fleet-bench-*; other containers are left alone).

Memory: the hosts share the machine (24 GiB here), so the benchmark runs each host with the
smallest caches the sandbox allows (vLLM's CPU KV cache 1 GiB, LMCache's L1 0.25 GB; --l1-size-gb
changes the size of N-sized chunks LMCache may hold, not N nor the time to deploy). "Peak used"
is the machine's MemTotal - MemAvailable sampled every 0.5 s, minus its value before the deploy.

CPU: every host shares this machine's cores, so a deploy cannot finish before the CPU work it
causes (vLLM imports, probes, service starts, Ansible and podman) is done on them. "CPU s" is
the machine's busy CPU time during the deploy (/proc/stat) and "CPU floor s" that time divided
by the number of cores: the shortest possible wall time here; wall / floor near 1 means the
deploy kept every core busy (on a real fleet each host brings its own cores).

Usage (as root, after scripts/setup-testhosts.sh; the `make deploy` prerequisites):
  . scripts/env.sh && python benchmarks/fleet_benchmark.py [--hosts 1,3,6] [--out benchmarks/results]
Writes fleet-<time>.json, fleet-<time>.md and fleet-<time>.png (drawn with the vLLM venv's
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
PREFIX = "fleet-bench-"
NETWORK = "fleet-bench"
FACT = "/etc/ansible/facts.d/vllm_block_size.fact"
RECAP_RE = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
# The smallest caches the sandbox allows: six hosts must fit on the machine at once.
BENCH_VARS = {"vllm_server_cpu_kvcache_space_gb": 1, "lmcache_server_l1_size_gb": 0.25}


def host_names(count):
    return ["%s%02d" % (PREFIX, i + 1) for i in range(count)]


def write_inventory(directory, hosts, groups=1):
    """An inventory like inventories/sandbox with only hybrid hosts, sharing its group_vars; with groups=2 the
    second half of the hosts sets vllm_server_block_size 32 (another input of N: a second probe group)."""
    os.makedirs(directory)
    os.symlink(os.path.join(REPO, "inventories", "sandbox", "group_vars"), os.path.join(directory, "group_vars"))
    lines = ["---", "all:", "  vars:", "    ansible_connection: containers.podman.podman",
             "    ansible_python_interpreter: /usr/bin/python3", "  children:", "    vllm_hosts:",
             "      children:", "        fleet_cpu_hybrid:", "          hosts:"]
    second = set(hosts[len(hosts) - len(hosts) // 2:]) if groups == 2 else set()
    lines += ["            %s:%s" % (h, " {vllm_server_block_size: 32}" if h in second else "") for h in hosts]
    with open(os.path.join(directory, "hosts.yml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return directory


def cpu_busy_s():
    """Busy CPU seconds of the whole machine since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / float(os.sysconf("SC_CLK_TCK"))


def mem_used():
    info = meminfo()
    return info["MemTotal"] - info["MemAvailable"]


class MemSampler(threading.Thread):
    """Peak of the machine's used memory while a command runs."""

    def __init__(self, interval=0.5):
        super(MemSampler, self).__init__(daemon=True)
        self.interval = interval
        self.base = mem_used()
        self.peak = self.base
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, mem_used())
            self.stop.wait(self.interval)


# The control node's CPU seconds of the last run_playbook (ansible-playbook and its children).
LAST_CONTROLLER_CPU_S = [0.0]


def controller_cpu_s():
    """CPU seconds of this process's finished children: ansible-playbook, its forks and the
    connection clients they ran (the control node's share of a deploy, not the hosts')."""
    times = os.times()
    return times.children_user + times.children_system


def run_playbook(args, log_path, env=None):
    """Run ansible-playbook, log its output; return (wall s, exit code, output, peak used bytes over base,
    busy CPU s of the machine). The control node's CPU s of the run goes to LAST_CONTROLLER_CPU_S."""
    sampler = MemSampler()
    sampler.start()
    cpu0 = cpu_busy_s()
    controller0 = controller_cpu_s()
    t0 = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.run(["ansible-playbook"] + args, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=env, check=False)
        out = proc.stdout.decode("utf-8", "replace")
        log.write(out)
    wall = time.time() - t0
    cpu = cpu_busy_s() - cpu0
    LAST_CONTROLLER_CPU_S[0] = controller_cpu_s() - controller0
    sampler.stop.set()
    sampler.join()
    return wall, proc.returncode, out, sampler.peak - sampler.base, cpu


def recap(output):
    """{host: {"ok": n, "changed": n, "failed": n, "unreachable": n}} of the last PLAY RECAP."""
    text = output[output.rfind("PLAY RECAP"):]
    return {m.group(1): {"ok": int(m.group(2)), "changed": int(m.group(3)), "unreachable": int(m.group(4)),
                         "failed": int(m.group(5))} for m in RECAP_RE.finditer(text)}


def podman(*argv):
    return subprocess.run(("podman",) + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)


def host_state(host):
    """The host's probe cache entries and the vLLM unit's InvocationID."""
    fact = podman("exec", host, "cat", FACT)
    try:
        entries = list(json.loads(fact.stdout.decode()).values())
    except ValueError:
        entries = []
    inv = podman("exec", host, "systemctl", "show", "-p", "InvocationID", "--value", "vllm.service")
    return {"entries": entries, "vllm_invocation": inv.stdout.decode().strip()}


def parse_utc(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def probe_intervals(states):
    """[(start, end)] of the probes that launched vLLM, from each host's cache entries."""
    out = []
    for state in states.values():
        for e in state["entries"]:
            if e.get("probed_at") and e.get("probe_elapsed_s") is not None and e.get("cmd"):
                end = parse_utc(e["probed_at"])
                out.append((end - float(e["probe_elapsed_s"]), end))
    return sorted(out)


def overlap(intervals):
    """(most probes running at once, sum of durations / span of all probes)."""
    if not intervals:
        return 0, None
    starts = [start for start, end in intervals]
    ends = [end for start, end in intervals]
    # at equal times an end counts before a start: back-to-back probes never ran together
    events = sorted([(t, 1) for t in starts] + [(t, -1) for t in ends])
    running = most = 0
    for dummy, step in events:
        running += step
        most = max(most, running)
    span = max(ends) - min(starts)
    total = sum(end - start for start, end in intervals)
    return most, (round(total / span, 2) if span > 0 else None)


def remove_hosts(hosts):
    if hosts:
        podman("rm", "--force", "--time", "5", *hosts)
    podman("network", "rm", "--force", NETWORK)


def bench_size(count, work, forks, groups=1, deploy_args=()):
    hosts = host_names(count)
    inv = write_inventory(os.path.join(work, "inventory-%d-%d" % (count, groups)), hosts, groups)
    extra = os.path.join(work, "bench-vars.json")
    with open(extra, "w") as f:
        json.dump(BENCH_VARS, f)
    logs = os.path.join(work, "logs")
    remove_hosts(hosts)
    up_wall, rc, out, dummy, dummy = run_playbook(
        ["playbooks/sandbox_up.yml", "-e", "fleet_sandbox_inventory=%s" % inv, "-e", "fleet_sandbox_network=%s" % NETWORK],
        os.path.join(logs, "up-%d.log" % count))
    row = {"hosts": count, "forks": forks, "up_s": round(up_wall, 1), "load_before": os.getloadavg()[0],
           "input_groups": groups, "deploy_args": list(deploy_args)}
    if rc != 0:
        row.update(ok=False, what="sandbox_up failed: %s" % out[-800:])
        return row
    deploy = ["-i", inv, "playbooks/deploy.yml", "--forks", str(forks), "-e", "@%s" % extra] + list(deploy_args)
    wall1, rc1, out1, peak1, cpu1 = run_playbook(deploy, os.path.join(logs, "deploy-%d-first.log" % count))
    first = {h: host_state(h) for h in hosts}
    cores = os.cpu_count()
    row.update(first_s=round(wall1, 1), first_rc=rc1, peak_used_gib=round(peak1 / float(GIB), 2),
               first_cpu_s=round(cpu1, 1), first_floor_s=round(cpu1 / cores, 1),
               first_controller_cpu_s_per_host=round(LAST_CONTROLLER_CPU_S[0] / count, 2),
               first_changed=sum(r["changed"] for h, r in recap(out1).items() if h in hosts),
               probe_groups=len(set(re.findall(r"probe group (G\d+):", out1))))
    if rc1 != 0:
        row.update(ok=False, what="first deploy failed (exit %d), see %s" % (rc1, logs))
        return row
    wall2, rc2, out2, dummy, cpu2 = run_playbook(deploy, os.path.join(logs, "deploy-%d-rerun.log" % count))
    second = {h: host_state(h) for h in hosts}
    rerun = recap(out2)
    launched = [h for h in hosts if first[h] != second[h]]
    intervals = probe_intervals(first)
    most, parallelism = overlap(intervals)
    durations = [end - start for start, end in intervals]
    row.update(rerun_s=round(wall2, 1), rerun_rc=rc2, rerun_cpu_s=round(cpu2, 1), rerun_floor_s=round(cpu2 / cores, 1),
               rerun_controller_cpu_s_per_host=round(LAST_CONTROLLER_CPU_S[0] / count, 2),
               rerun_changed=sum(r["changed"] for h, r in rerun.items() if h in hosts),
               rerun_hosts_relaunched=launched, rerun_over_first=round(wall2 / wall1, 3),
               probes=len(durations), probe_mean_s=round(sum(durations) / len(durations), 1) if durations else None,
               probe_overlap=most, probe_parallelism=parallelism,
               n=sorted({e["vllm_block_size"] for s in first.values() for e in s["entries"]}))
    row["ok"] = rc2 == 0 and row["rerun_changed"] == 0 and not launched
    row["what"] = "ok" if row["ok"] else "re-run changed %d task(s), relaunched on %s (exit %d)" % (
        row["rerun_changed"], ", ".join(launched) or "no host", rc2)
    return row


def markdown(rows):
    lines = ["| hosts | probe groups | probes launched | first deploy s | CPU floor s | no-op re-run s | CPU floor s | re-run / first "
             "| changed on re-run | vLLM launched on re-run | probes at once | probe parallelism | mean probe s "
             "| peak used GiB | N | load | control node CPU s/host first / no-op |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |" % (
            r["hosts"], fmt(r.get("probe_groups")), fmt(r.get("probes")), fmt(r.get("first_s"), "%.1f"), fmt(r.get("first_floor_s"), "%.1f"),
            fmt(r.get("rerun_s"), "%.1f"), fmt(r.get("rerun_floor_s"), "%.1f"),
            fmt(r.get("rerun_over_first"), "%.2f"), fmt(r.get("rerun_changed")),
            "-" if "rerun_hosts_relaunched" not in r else (len(r["rerun_hosts_relaunched"]) or "none"),
            fmt(r.get("probe_overlap")), fmt(r.get("probe_parallelism"), "%.2f"), fmt(r.get("probe_mean_s"), "%.1f"),
            fmt(r.get("peak_used_gib"), "%.1f"), ",".join(str(n) for n in r.get("n", [])) or "-",
            fmt(r.get("load_before"), "%.1f"), fmt(r.get("first_controller_cpu_s_per_host"), "%.2f"),
            fmt(r.get("rerun_controller_cpu_s_per_host"), "%.2f")))
    return "\n".join(lines)


def draw_plot(data, path):
    """Bars of first deploy and no-op re-run wall time per fleet size; needs Pillow."""
    from PIL import Image, ImageDraw  # pylint: disable=import-error
    rows = [r for r in data["rows"] if r.get("first_s") is not None]
    font = load_font()
    pad, label_w, bar_w, row_h = 20, 170, 640, 28
    width = pad + label_w + bar_w + 220
    height = 80 + row_h * 2 * len(rows) + 70
    img = Image.new("RGB", (width, height), "white")
    d = ImageDraw.Draw(img)
    d.text((pad, 12), "deploy.yml wall time by fleet size (%s, %d cores, %.0f GiB)" % (
        data["machine"]["node"], data["machine"]["cpus"], data["machine"]["mem_total_gib"]), fill="black", font=font)
    vmax = max([r.get("first_s") or 0 for r in rows] + [1e-9])
    y = 50
    for r in rows:
        for key, color, name in (("first_s", "#ff7f0e", "first deploy"), ("rerun_s", "#1f77b4", "no-op re-run")):
            v = r.get(key)
            floor = r.get(key.replace("_s", "_floor_s"))
            d.text((pad, y + 4), "%d host%s, %s" % (r["hosts"], "" if r["hosts"] == 1 else "s", name),
                   fill="black", font=font)
            if v is not None:
                w = max(int(bar_w * v / vmax), 1)
                d.rectangle([pad + label_w, y, pad + label_w + w, y + row_h - 8], fill=color)
                if floor:
                    fx = pad + label_w + int(bar_w * floor / vmax)
                    d.line([fx, y - 2, fx, y + row_h - 6], fill="black", width=3)
                d.text((pad + label_w + w + 6, y + 4), "%.0f s" % v, fill="black", font=font)
            y += row_h
        y += 6
    d.text((pad, height - 60), "every host: real probe of N, real LMCache server, real vLLM CPU build (tiny hybrid "
           "model); re-run: nothing changed, no vLLM launched", fill="#444444", font=font)
    d.text((pad, height - 40), "black tick: CPU floor (busy CPU seconds of the machine / cores)", fill="#444444", font=font)
    img.save(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--hosts", default="1,3,6", help="fleet sizes, comma-separated (default 1,3,6)")
    ap.add_argument("--forks", type=int, default=None, help="ansible forks (default max(5, hosts))")
    ap.add_argument("--venv", default=DEFAULT_VENV, help="a venv with Pillow, for the plot")
    ap.add_argument("--keep", action="store_true", help="leave the hosts of the largest fleet running")
    ap.add_argument("--groups", type=int, choices=(1, 2), default=1,
                    help="2: the second half of the hosts sets vllm_server_block_size 32 (two probe groups)")
    ap.add_argument("--deploy-args", default="",
                    help="added to deploy.yml's command line, e.g. '--tags check' (install and probe, no service)")
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results"))
    ap.add_argument("--plot", nargs=2, metavar=("JSON", "PNG"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plot:
        with open(args.plot[0]) as f:
            draw_plot(json.load(f), args.plot[1])
        return
    sizes = [int(s) for s in args.hosts.split(",") if s.strip()]
    work = tempfile.mkdtemp(prefix="fleet-bench-")
    os.makedirs(os.path.join(work, "logs"))
    load_before = os.getloadavg()
    started = time.time()
    rows = []
    try:
        for count in sizes:
            forks = args.forks or max(5, count)
            row = bench_size(count, work, forks, args.groups, args.deploy_args.split())
            rows.append(row)
            print("%d host(s): %s" % (count, json.dumps(row)), file=sys.stderr)
            if not (args.keep and count == sizes[-1]):
                remove_hosts(host_names(count))
    finally:
        if not args.keep:
            remove_hosts(host_names(max(sizes)))
    table = markdown(rows)
    load_after = os.getloadavg()
    if not os.path.isdir(args.out):
        os.makedirs(args.out)
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    base = os.path.join(args.out, "fleet-%s" % stamp)
    data = {"machine": machine(loadavg_before=load_before, loadavg_after=load_after),
            "bench_vars": BENCH_VARS, "total_s": round(time.time() - started, 1), "rows": rows,
            "markdown": table, "logs": os.path.join(work, "logs"),
            "command": "python benchmarks/fleet_benchmark.py " + " ".join(sys.argv[1:])}
    with open(base + ".json", "w") as f:
        json.dump(data, f, indent=2)
    with open(base + ".md", "w") as f:
        f.write("# deploy.yml on 1 to %d sandbox hosts %s\n\n%s\n\nReproduce: `%s`\n" % (
            max(sizes), stamp, table, data["command"]))
    png = plot_with_venv(__file__, args.venv, base + ".json", base + ".png")
    print(table)
    print("JSON: %s.json, Markdown: %s.md, plot: %s (logs in %s)" % (base, base, png, data["logs"]))
    if not all(r.get("ok") for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
