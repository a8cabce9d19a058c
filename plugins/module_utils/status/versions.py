# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed versions of Python distributions, read by a virtualenv's own python (pure).

``versions_argv(python, names)`` is the command line: ``python -c VERSIONS_SCRIPT name...`` prints one
JSON object ``{"<dist>": "<version>" or null, ...}`` (``importlib.metadata``, nothing else imported).
The roles' install tasks (through the filter ``lmcache_vllm.fleet.versions_argv``) and
``service_status`` both run it.
"""

from __future__ import annotations

VERSIONS_SCRIPT = '\n'.join([
    'import importlib.metadata as m, json, sys',
    'def version(name):',
    '    try:',
    '        return m.version(name)',
    '    except m.PackageNotFoundError:',
    '        return None',
    'print(json.dumps({name: version(name) for name in sys.argv[1:]}))',
])


# A virtualenv created in this run (or one check mode would create) holds nothing yet: every name is null.
NOTHING_INSTALLED_SCRIPT = 'import json, sys; print(json.dumps(dict.fromkeys(sys.argv[1:])))'


def versions_argv(python, names, new=False):
    """argv that prints the versions of ``names`` installed for ``python`` (all null when ``new``)."""
    script = NOTHING_INSTALLED_SCRIPT if new else VERSIONS_SCRIPT
    return [str(python), '-c', script] + [str(name) for name in names]
