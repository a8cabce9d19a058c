# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure parts of benchmarks/probe_benchmark.py: the cases and the summary's ratios."""

from __future__ import absolute_import, division, print_function

import pytest


@pytest.fixture(scope="module")
def bench(repo_script):
    return repo_script("benchmarks/probe_benchmark.py")


def row(case, line_s, rss=1000, ok=True, model="Qwen3.5-0.8B"):
    return {"model": model, "case": case, "line_s": line_s, "wall_s": (line_s or 0) + 5, "peak_rss_mib": rss, "ok": ok}


def test_module_cases_name_their_launcher(bench):
    assert bench.MODULE_CASES["shrunk"]["launcher"] == "engine"
    assert bench.MODULE_CASES["serve-shrunk"]["launcher"] == "serve"
    assert bench.MODULE_CASES["full"]["shrink"] == "never" and bench.MODULE_CASES["full"]["force"] is True
    for cases in bench.DEFAULT_CASES.values():
        assert all(c == "plain" or c in bench.MODULE_CASES for c in cases)


def test_summary_takes_medians_and_compares_launchers(bench):
    rows = [row("plain", 80.0), row("plain", 78.0),
            row("serve-shrunk", 70.0), row("serve-shrunk", 74.0), row("serve-shrunk", None, ok=False),
            row("shrunk", 20.0), row("shrunk", 28.0), row("shrunk", 24.0),
            row("serve-full", 100.0), row("full", 30.0)]
    s = bench.summary(rows)["Qwen3.5-0.8B"]
    assert s["plain_line_s"] == 79.0 and s["serve_shrunk_line_s"] == 72.0 and s["engine_shrunk_line_s"] == 24.0
    assert s["engine_over_serve_line_shrunk"] == round(24.0 / 72.0, 2)
    assert s["engine_shrunk_over_plain_line"] == round(24.0 / 79.0, 2)
    assert s["engine_over_serve_line_full"] == 0.3


def _no_ansible_cli(name):
    raise ImportError(name)


def test_ansible_playbook_found_from_a_plain_python(bench, monkeypatch):
    """Run with a Python that has no ansible-playbook beside it and none on PATH, the project's .venv is used."""
    import os
    monkeypatch.setattr(bench.sys, "executable", "/nonexistent/python3")
    monkeypatch.setenv("PATH", "/nonexistent")
    import fleet_collection
    monkeypatch.setattr(fleet_collection.importlib, "import_module", _no_ansible_cli)
    [found] = fleet_collection.ansible_playbook_argv()
    assert found == os.path.join(fleet_collection.REPO_ROOT, ".venv", "bin", "ansible-playbook")
    assert os.access(found, os.X_OK)
