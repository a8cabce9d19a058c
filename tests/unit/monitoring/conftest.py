# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The promtool of the monitoring tests (Debian's, scripts/setup-prometheus.sh)."""

from __future__ import annotations

import pytest

from prometheus_tools import prometheus_program


@pytest.fixture(name='promtool')
def promtool_fixture():
    return prometheus_program('promtool')
