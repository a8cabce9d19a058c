# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tests' reader of systemd units (tests/systemd_unit.py), used by the unit, playbook and GPU tests."""

import json

import pytest

from systemd_unit import (
    UnitSyntaxError, parse_env_file, parse_environment, parse_exec, service_command, split_words,
)

UNIT = r"""#
# Ansible managed
#
[Unit]
Description=x

[Service]
Environment=HOME=/var/lib/vllm
Environment="A=b c" D=e
EnvironmentFile=/etc/lmcache-vllm-fleet/vllm.env
EnvironmentFile=-/etc/missing.env
ExecStart=/opt/vllm/venv/bin/vllm serve /m \
    --port 8000 \
# a comment inside a continuation is dropped
    --additional-config '{"gdn_prefill_backend": "triton"}' \
    --kv-transfer-config '{"kv_connector":"LMCacheMPConnector","kv_role":"kv_both"}' \
    --x "a\"b" 100%% $D ${A}
ExecStartPost=/opt/vllm/venv/bin/python /opt/vllm/venv/bin/fleet-wait-ready http://127.0.0.1:8000/health 1800
User=vllm
WorkingDirectory=/var/lib/vllm
"""


def test_service_command(tmp_path):
    d = tmp_path / "etc" / "lmcache-vllm-fleet"
    d.mkdir(parents=True)
    (d / "vllm.env").write_text('# c\nVLLM_SERVER_DEV_MODE="1"\nD=f\nQ=\'x y\'\n')
    cmd = service_command(UNIT, root=str(tmp_path))
    assert cmd["argv"][:3] == ["/opt/vllm/venv/bin/vllm", "serve", "/m"]
    i = cmd["argv"].index("--additional-config")
    assert json.loads(cmd["argv"][i + 1]) == {"gdn_prefill_backend": "triton"}
    i = cmd["argv"].index("--kv-transfer-config")
    assert json.loads(cmd["argv"][i + 1])["kv_connector"] == "LMCacheMPConnector"
    assert cmd["argv"][-5:] == ["--x", 'a"b', "100%", "f", "b c"]
    assert cmd["env"] == {"HOME": "/var/lib/vllm", "A": "b c", "D": "f", "VLLM_SERVER_DEV_MODE": "1", "Q": "x y"}
    assert cmd["user"] == "vllm" and cmd["working_directory"] == "/var/lib/vllm"
    assert cmd["exec_start_post"][0][-1] == "1800"


def test_words_and_escapes():
    assert split_words(r"a 'b c' \"d\x41\101 \s") == ["a", "b c", '"dAA', " "]
    assert split_words("'' x") == ["", "x"]
    assert split_words("$A ${A} $$", {"A": "1 2"}, expand=True) == ["1", "2", "1 2", "$"]
    assert parse_exec("-@/bin/x name arg", {}) == ("-@", ["/bin/x", "arg"])
    assert parse_exec(":/bin/x $A", {"A": "v"}) == (":", ["/bin/x", "$A"])


def test_environment_and_env_file():
    assert parse_environment(['"A=1 2" B=3', "C="]) == {"A": "1 2", "B": "3", "C": ""}
    assert parse_env_file('A="x \\"y\\""\nB = plain # c\nexport C=\'q\'\n;x\n') == {
        "A": 'x "y"', "B": "plain", "C": "q"}
    with pytest.raises(UnitSyntaxError):
        split_words("'open")
    with pytest.raises(UnitSyntaxError):
        split_words("%n")
