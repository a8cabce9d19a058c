# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/files/fleet_backup.py: what deploy.yml copies aside before a rollout."""

from __future__ import absolute_import, division, print_function

import json
import os
import stat

import pytest


@pytest.fixture(scope="module")
def script(repo_script):
    return repo_script("playbooks/files/fleet_backup.py")


@pytest.fixture
def host(tmp_path):
    (tmp_path / "system").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "system" / "vllm.service").write_text("[Service]\nExecStart=/bin/true\n")
    (tmp_path / "etc" / "vllm.env").write_text("HF_TOKEN=secret\n")
    return tmp_path


def test_copies_what_exists_and_reports_what_does_not(script, host, capsys):
    unit, env, missing = (str(host / "system" / "vllm.service"), str(host / "etc" / "vllm.env"),
                          str(host / "etc" / "vllm.fingerprint"))
    dest = host / "backup"
    assert script.main([str(dest), "--files", unit, env, missing, "--services", "fleet-no-such-unit"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files"] == {unit: True, env: True, missing: False}
    assert out["active"] == {"fleet-no-such-unit": False}
    assert isinstance(out["start"], int)
    assert sorted(os.listdir(str(dest))) == ["vllm.env", "vllm.service"]
    assert (dest / "vllm.env").read_text() == "HF_TOKEN=secret\n"
    assert stat.S_IMODE(os.stat(str(dest)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(str(dest / "vllm.env")).st_mode) == 0o600


def test_a_second_backup_replaces_the_first(script, host, capsys):
    unit = host / "system" / "vllm.service"
    dest = host / "backup"
    script.main([str(dest), "--files", str(unit)])
    unit.write_text("[Service]\nExecStart=/bin/false\n")
    script.main([str(dest), "--files", str(unit)])
    capsys.readouterr()
    assert (dest / "vllm.service").read_text() == "[Service]\nExecStart=/bin/false\n"


def test_dry_run_writes_nothing(script, host, capsys):
    unit = str(host / "system" / "vllm.service")
    dest = host / "backup"
    script.main([str(dest), "--dry-run", "--files", unit])
    assert json.loads(capsys.readouterr().out)["files"] == {unit: True}
    assert not dest.exists()


def test_refuses_two_files_with_one_basename(script, host, capsys):
    with pytest.raises(SystemExit):
        script.main([str(host / "backup"), "--files", str(host / "system" / "vllm.service"),
                     str(host / "etc" / "vllm.service")])
    assert "share a basename" in capsys.readouterr().err
