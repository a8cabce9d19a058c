# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read a rendered systemd unit the way systemd does (the tests' one reader of units; the collection
only writes them, with ``plugins/module_utils/shared/systemd_quote.py``), for what the tests check and the
GPU harness runs by hand:
``ExecStart=`` (prefixes, quoting, C escapes, ``$VAR``/``${VAR}``, ``%%``), ``Environment=`` and
``EnvironmentFile=`` (systemd.syntax(7), systemd.service(5), systemd.exec(5))."""

from __future__ import annotations

import os
import re

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", '"': '"', "'": "'", "s": " "}
EXEC_PREFIXES = "@-:+!"


class UnitSyntaxError(ValueError):
    pass


def parse_unit(text):
    """{section: [(key, value), ...]} with continuation lines joined and comments dropped."""
    sections = {}
    current = None
    pending = None
    for raw in text.splitlines():
        line = raw.strip()
        if pending is not None:
            if line.startswith(("#", ";")):
                continue
            pending += " " + line
            line = pending
            pending = None
        elif not line or line.startswith(("#", ";")):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1].rstrip()
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        if current is None or "=" not in line:
            raise UnitSyntaxError("not a key=value line inside a section: %r" % raw)
        key, value = line.split("=", 1)
        current.append((key.strip(), value.strip()))
    if pending is not None:
        key, value = pending.split("=", 1)
        current.append((key.strip(), value.strip()))
    return sections


def values(sections, section, key):
    """Every value of key in section; an empty assignment resets the list, as in systemd."""
    out = []
    for k, v in sections.get(section, []):
        if k == key:
            if v == "":
                out = []
            else:
                out.append(v)
    return out


def _specifiers(word):
    if "%" not in word:
        return word
    out, i = [], 0
    while i < len(word):
        c = word[i]
        if c == "%":
            if i + 1 < len(word) and word[i + 1] == "%":
                out.append("%")
                i += 2
                continue
            raise UnitSyntaxError("unit specifier %r is not supported here" % word[i:i + 2])
        out.append(c)
        i += 1
    return "".join(out)


def split_words(value, env=None, expand=False):
    """Split like systemd: whitespace separates words, '...' and "..." quote, C escapes apply.

    With expand=True, ``$VAR`` outside quotes expands to the variable split into words,
    ``${VAR}`` to one word (an unset variable gives nothing), ``$$`` is a literal ``$``.
    Returns a list of words.
    """
    env = env or {}
    words = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " \t\n":
            i += 1
        if i >= n:
            break
        buf = []
        quoted = False
        split_var = None
        while i < n and value[i] not in " \t\n":
            c = value[i]
            if c in "\"'":
                quote = c
                quoted = True
                i += 1
                while True:
                    if i >= n:
                        raise UnitSyntaxError("unbalanced quote in %r" % value)
                    c = value[i]
                    if c == quote:
                        i += 1
                        break
                    if c == "\\":
                        seq, i = _escape(value, i)
                        buf.append(seq)
                        continue
                    if c == "$" and expand:
                        text, i = _variable(value, i, env)[:2]
                        buf.append(text)
                        continue
                    buf.append(c)
                    i += 1
                continue
            if c == "\\":
                seq, i = _escape(value, i)
                buf.append(seq)
                continue
            if c == "$" and expand:
                text, i, whole = _variable(value, i, env)
                if whole and not buf and (i >= n or value[i] in " \t\n"):
                    split_var = text
                    break
                buf.append(text)
                continue
            buf.append(c)
            i += 1
        if split_var is not None:
            words.extend(split_var.split())
            continue
        word = _specifiers("".join(buf))
        if word or quoted:
            words.append(word)
    return words


def _escape(value, i):
    """(text, next index) of the escape sequence at value[i] == '\\'."""
    if i + 1 >= len(value):
        raise UnitSyntaxError("trailing backslash in %r" % value)
    c = value[i + 1]
    if c in _ESCAPES:
        return _ESCAPES[c], i + 2
    if c == "x" and re.match(r"[0-9a-fA-F]{2}", value[i + 2:i + 4]):
        return chr(int(value[i + 2:i + 4], 16)), i + 4
    if c == "u" and re.match(r"[0-9a-fA-F]{4}", value[i + 2:i + 6]):
        return chr(int(value[i + 2:i + 6], 16)), i + 6
    if c == "U" and re.match(r"[0-9a-fA-F]{8}", value[i + 2:i + 10]):
        return chr(int(value[i + 2:i + 10], 16)), i + 10
    if re.match(r"[0-7]{3}", value[i + 1:i + 4]):
        return chr(int(value[i + 1:i + 4], 8)), i + 4
    raise UnitSyntaxError("unknown escape \\%s in %r" % (c, value))


def _variable(value, i, env):
    """(text, next index, whole-word form) of the variable reference at value[i] == '$'."""
    if value[i + 1:i + 2] == "$":
        return "$", i + 2, False
    if value[i + 1:i + 2] == "{":
        end = value.find("}", i + 2)
        if end < 0:
            raise UnitSyntaxError("unterminated ${ in %r" % value)
        return env.get(value[i + 2:end], ""), end + 1, False
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", value[i + 1:])
    if not m:
        return "$", i + 1, False
    return env.get(m.group(0), ""), i + 1 + m.end(), True


def parse_exec(value, env):
    """(prefixes, argv) of one ExecStart= value."""
    i = 0
    while i < len(value) and value[i] in EXEC_PREFIXES:
        i += 1
    prefixes, rest = value[:i], value[i:]
    argv = split_words(rest, env, expand=":" not in prefixes)
    if not argv:
        raise UnitSyntaxError("empty command line: %r" % value)
    if "@" in prefixes:
        # '@': the second word is argv[0], the first the executable.
        argv = [argv[0]] + argv[2:]
    return prefixes, argv


def parse_environment(assignments):
    """{name: value} of Environment= values (each a list of quoted assignments)."""
    env = {}
    for value in assignments:
        for word in split_words(value):
            if "=" not in word:
                raise UnitSyntaxError("not an assignment in Environment=: %r" % word)
            name, val = word.split("=", 1)
            env[name] = val
    return env


def parse_env_file(text):
    """{name: value} of an EnvironmentFile= (KEY=VALUE lines, quotes, comments, continuations)."""
    env = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith(("#", ";")):
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + lines[i].strip()
            i += 1
        if "=" not in line:
            continue
        name, raw = line.split("=", 1)
        name = name.strip()
        if name.startswith("export "):
            name = name[len("export "):].strip()
        raw = raw.strip()
        out = []
        j = 0
        while j < len(raw):
            c = raw[j]
            if c == "'":
                end = raw.find("'", j + 1)
                if end < 0:
                    raise UnitSyntaxError("unbalanced ' in %r" % line)
                out.append(raw[j + 1:end])
                j = end + 1
            elif c == '"':
                j += 1
                while j < len(raw) and raw[j] != '"':
                    if raw[j] == "\\" and j + 1 < len(raw) and raw[j + 1] in '"\\`$':
                        out.append(raw[j + 1])
                        j += 2
                        continue
                    out.append(raw[j])
                    j += 1
                if j >= len(raw):
                    raise UnitSyntaxError('unbalanced " in %r' % line)
                j += 1
            elif c == "\\" and j + 1 < len(raw):
                out.append(raw[j + 1])
                j += 2
            elif c == "#" and (j == 0 or raw[j - 1] in " \t"):
                break
            else:
                out.append(c)
                j += 1
        env[name] = "".join(out).rstrip()
    return env


def service_command(unit_text, root="/"):
    """Everything needed to start the unit's main process by hand.

    Environment files are read below root (a rendered tree); a leading '-' makes one optional.
    Returns a dict: argv, prefixes, env (Environment= then EnvironmentFile=, the latter wins),
    user, group, working_directory, exec_start_post, env_files.
    """
    sections = parse_unit(unit_text)
    service = "Service"
    env = parse_environment(values(sections, service, "Environment"))
    env_files = []
    for spec in values(sections, service, "EnvironmentFile"):
        optional = spec.startswith("-")
        path = spec[1:] if optional else spec
        real = os.path.join(root, path.lstrip("/"))
        env_files.append(path)
        try:
            with open(real) as fh:
                env.update(parse_env_file(fh.read()))
        except OSError:
            if not optional:
                raise
    starts = values(sections, service, "ExecStart")
    if len(starts) != 1:
        raise UnitSyntaxError("expected one ExecStart=, found %d" % len(starts))
    prefixes, argv = parse_exec(starts[0], env)

    def one(key):
        vals = values(sections, service, key)
        return vals[-1] if vals else None

    return {
        "argv": argv, "prefixes": prefixes, "env": env, "env_files": env_files,
        "user": one("User"), "group": one("Group"), "working_directory": one("WorkingDirectory"),
        "exec_start_post": [parse_exec(v, env)[1] for v in values(sections, service, "ExecStartPost")],
    }
