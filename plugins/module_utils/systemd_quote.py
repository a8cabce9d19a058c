# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd's quoting and escaping, both ways (pure functions).

Writing (what the host plan puts into unit and environment files):

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

Reading (what systemd does with them, for the tests and the acceptance harness):
``split_exec(value)`` and ``parse_environment(value)`` undo the above the way systemd's
``extract_first_word(..., EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE)`` does, and ``unit_values(text)``
reads the directives of a unit file, joining continuation lines.

Control characters (newline, carriage return, NUL and the other C0 codes) are never written:
callers refuse them first (``has_control_character``).
"""

from __future__ import annotations

import re

PLAIN_WORD = re.compile(r'^[A-Za-z0-9_./:=,+@-]+$')
CONTROL = re.compile(r'[\x00-\x08\x0a-\x1f\x7f]')
ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')

_C_ESCAPES = {'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v',
              '\\': '\\', '"': '"', "'": "'", 's': ' '}


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


# --------------------------------------------------------------------------- reading

def _unescape_specifiers(word, dollars):
    out = []
    i = 0
    while i < len(word):
        char = word[i]
        if char == '%':
            if word[i + 1:i + 2] == '%':
                out.append('%')
                i += 2
                continue
            raise ValueError('unescaped specifier %%%s in %r' % (word[i + 1:i + 2], word))
        if dollars and char == '$':
            if word[i + 1:i + 2] == '$':
                out.append('$')
                i += 2
                continue
            raise ValueError('variable reference in %r' % word)
        out.append(char)
        i += 1
    return ''.join(out)


def _words(value):
    """Split like systemd's extract_first_word with EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE."""
    words = []
    i = 0
    n = len(value)
    while True:
        while i < n and value[i] in ' \t\n':
            i += 1
        if i >= n:
            return words
        word = []
        quote = None
        while i < n:
            char = value[i]
            if quote is None and char in ' \t\n':
                break
            if char == '\\':
                nxt = value[i + 1:i + 2]
                if nxt == '':
                    raise ValueError('trailing backslash in %r' % value)
                if nxt in _C_ESCAPES:
                    word.append(_C_ESCAPES[nxt])
                    i += 2
                    continue
                if nxt == 'x' and re.match(r'[0-9a-fA-F]{2}', value[i + 2:i + 4]):
                    word.append(chr(int(value[i + 2:i + 4], 16)))
                    i += 4
                    continue
                raise ValueError('unknown escape \\%s in %r' % (nxt, value))
            if quote is None and char in '"\'':
                quote = char
                i += 1
                continue
            if quote is not None and char == quote:
                quote = None
                i += 1
                continue
            word.append(char)
            i += 1
        if quote is not None:
            raise ValueError('unterminated quote in %r' % value)
        words.append(''.join(word))


def split_exec(value):
    """The argv systemd runs for an ExecStart= value (continuations already joined)."""
    raw = _words(value)
    return [_unescape_specifiers(w, dollars=True) for w in raw]


def parse_environment(value):
    """``{name: value}`` of one Environment= line."""
    out = {}
    for word in _words(value):
        word = _unescape_specifiers(word, dollars=False)
        name, sep, val = word.partition('=')
        if not sep or not ENV_NAME.match(name):
            raise ValueError('not an assignment: %r' % word)
        out[name] = val
    return out


def parse_env_file(text):
    """``{name: value}`` of an EnvironmentFile written by env_file_line (comments skipped)."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(('#', ';')):
            continue
        name, sep, val = line.partition('=')
        if not sep or not ENV_NAME.match(name) or not (val.startswith('"') and val.endswith('"') and len(val) >= 2):
            raise ValueError('not an assignment: %r' % line)
        body = val[1:-1]
        result = []
        i = 0
        while i < len(body):
            if body[i] == '\\' and body[i + 1:i + 2] in ('\\', '"', '$', '`'):
                result.append(body[i + 1])
                i += 2
                continue
            if body[i] in '"$`':
                raise ValueError('unescaped %r in %r' % (body[i], line))
            result.append(body[i])
            i += 1
        out[name] = ''.join(result)
    return out


def unit_values(text):
    """``[(section, key, value), ...]`` of a unit file, continuation lines joined."""
    entries = []
    section = None
    pending = None
    for raw in text.splitlines():
        if pending is not None:
            line = pending + ' ' + raw.strip()
        else:
            line = raw.strip()
            if not line or line.startswith(('#', ';')):
                continue
        if line.endswith('\\') and not line.endswith('\\\\'):
            pending = line[:-1].rstrip()
            continue
        pending = None
        if line.startswith('[') and line.endswith(']'):
            section = line[1:-1]
            continue
        key, sep, value = line.partition('=')
        if not sep:
            raise ValueError('not a directive: %r' % line)
        entries.append((section, key.strip(), value.strip()))
    return entries
