# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd's quoting and escaping, as the host plan writes unit and environment files (pure functions).

``exec_word(arg)``
    one word of ``ExecStart=``: ``%`` -> ``%%`` (specifiers), ``$`` -> ``$$`` (variable
    expansion), and double quotes with C escapes around anything that is not a plain word.
``environment_assignment(name, value)``
    one ``Environment=`` assignment, ``"NAME=value"``: ``%`` -> ``%%``, C escapes inside double
    quotes (systemd does not expand ``$`` there).
``env_file_line(name, value)``
    one line of an ``EnvironmentFile=``: ``NAME="value"`` with ``\\``, ``"``, ``$`` and a backtick
    escaped (no specifiers there).
``specifier_text(text)``
    free text of ``Description=`` and the like: ``%`` -> ``%%``.

The tests read the files back the way systemd does with their own reader, ``tests/systemd_unit.py``.

Control characters (newline, carriage return, NUL and the other C0 codes) are never written:
callers refuse them first (``has_control_character``).
"""

from __future__ import annotations

import re

PLAIN_WORD = re.compile(r'^[A-Za-z0-9_./:=,+@-]+$')
CONTROL = re.compile(r'[\x00-\x08\x0a-\x1f\x7f]')
ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def has_control_character(text):
    """True when ``text`` holds a control character other than tab."""
    return bool(CONTROL.search(text))


def _c_quote(text):
    return '"%s"' % text.replace('\\', '\\\\').replace('"', '\\"').replace('\t', '\\t')


def specifier_text(text):
    """Free text (Description=): ``%`` doubled so that systemd expands no specifier."""
    return str(text).replace('%', '%%')


def exec_word(arg, first=False):
    """One ExecStart= word, escaped so that systemd passes exactly ``arg``.

    The first word (the executable) is always quoted when it starts with one of systemd's
    prefix characters (``@-:+!``), which would otherwise change how the command runs.
    """
    text = str(arg).replace('%', '%%').replace('$', '$$')
    if PLAIN_WORD.match(text) and not (first and text[0] in '@-:+!'):
        return text
    return _c_quote(text)


def exec_line(argv, continuation=True):
    """The value of ExecStart= for ``argv``: one word per argument, a flag and its value on one line."""
    words = [exec_word(a, first=(i == 0)) for i, a in enumerate(argv)]
    if not continuation:
        return ' '.join(words)
    out = []
    for index, word in enumerate(words):
        if index and str(argv[index]).startswith('--'):
            out.append(' \\\n    ' + word)
        elif index:
            out.append(' ' + word)
        else:
            out.append(word)
    return ''.join(out)


def environment_assignment(name, value):
    """One Environment= assignment, quoted: ``"NAME=value"``."""
    return _c_quote('%s=%s' % (name, str(value).replace('%', '%%')))


def env_file_line(name, value):
    """One line of an EnvironmentFile=: ``NAME="value"``."""
    text = str(value)
    for char in ('\\', '"', '$', '`'):
        text = text.replace(char, '\\' + char)
    return '%s="%s"' % (name, text)
