# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Constants shared by the playbook tests (imported as ``fleet_playbook_helpers``: a name no other
test directory uses, unlike ``conftest``)."""

from __future__ import annotations

import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Every host of a test inventory points at an ssh that does not exist: any task that
# really contacted a host would fail with "Unable to execute ssh command line".
NO_CONTACT = {
    'ansible_host': '192.0.2.10',
    'ansible_connection': 'ssh',
    'ansible_ssh_executable': '/nonexistent/ssh',
}
CONTACT_MARKERS = ('Unable to execute ssh', 'UNREACHABLE', '/nonexistent/ssh')
