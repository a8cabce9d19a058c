# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet tables as pages (pure functions): the plan's ``fleet.md`` and ``fleet.html``, and the
status ``fleet.html``. The rows come from ``fleet_report``; every value is escaped here (HTML:
:func:`escape`; Markdown: :func:`md_cell`). Self-contained pages: no script, no link, no remote style.
"""

from __future__ import annotations

import html

STYLE = '''<style>
  body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem; color: #1f2328; background: #fff; }
  h1 { font-size: 1.5rem; margin-bottom: .25rem; }
  p.note { color: #59636e; max-width: 60rem; }
  table { border-collapse: collapse; margin-top: 1rem; font-size: .9rem; }
  th, td { border: 1px solid #d1d9e0; padding: .35rem .6rem; text-align: left; white-space: nowrap;%s }
  th { background: #f6f8fa; position: sticky; top: 0; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  td.n { font-weight: 600; }
  tr:nth-child(even) td { background: #fbfcfd; }
%s  code { background: #f6f8fa; padding: 0 .2rem; border-radius: 3px; }
</style>'''

PLAN_STYLE = STYLE % ('', '''  .source-expected { color: #9a6700; }
  .mismatch { color: #cf222e; font-weight: 600; }
  ul.warnings li { color: #9a6700; margin: .25rem 0; }
''')

STATUS_STYLE = STYLE % (' vertical-align: top;', '''  .state-serving { color: #1a7f37; font-weight: 600; }
  .state-degraded, .source-unit, .source-unknown { color: #9a6700; font-weight: 600; }
  .state-down, .state-absent, .state-unreachable, .state-error, .state-unknown, .state-drift { color: #cf222e; font-weight: 600; }
  ul.problems li { color: #cf222e; margin: .25rem 0; }
  span.gpu { display: block; color: #59636e; font-size: .8rem; }
''')

PLAN_INTRO_MD = ('{count} host(s). N is predicted from each model\'s config.json on the control node\n'
                 '(`predicted`), or taken from `vllm_server_expected_block_size` when it cannot be predicted (`expected`).\n'
                 'The probe on each host decides at deploy time; chunk size and max-num-batched-tokens follow N.')

PLAN_INTRO_HTML = ('{count} host(s). N is predicted from each model\'s config.json on the control node\n'
                   '(<code>predicted</code>), or taken from <code>vllm_server_expected_block_size</code> when it cannot be'
                   ' predicted\n(<code>expected</code>). The probe on each host decides at deploy time; chunk size and'
                   ' max-num-batched-tokens follow N.')

PLAN_TITLES = ('host', 'model', 'device', 'hardware N is predicted for', 'TP', 'GPUs', 'dtype', 'KV cache dtype',
               'conv / SSM state dtype', 'N', 'N source', 'expected N', 'chunk size', 'max-num-batched-tokens',
               'vLLM port', 'LMCache port', 'LMCache HTTP port')

PLAN_GROUPS = '''## Probe groups

Hosts whose inputs of N (model, vLLM version, TP, dtypes, block size, speculative configuration, the GPU
kind and count N is planned for) are identical form a group; on deploy, one host of a group probes and
the others take its N, then confirm it from their own service. The hardware each host reports (GPU
models, driver, compute capability, CPU) can split a group further at deploy time.

| group | hosts | probed on | the others |
|---|---:|---|---|
'''

PLAN_FILES = ('Each host\'s folder holds the files the roles would write, at their path on the host, and {q}plan.json{e}\n'
              '(inputs, prediction details, derived values). Secrets in the environment files are shown as {r}.')

STATUS_NOTE = '''N comes from the probe's cache entry for the inputs recorded beside the vLLM unit (<code>probe</code>: vLLM was launched to read it;
<code>journal</code>: read from the running unit's start-up log), else from the unit's description (<code>unit</code>).
Hit ratios are cumulative since each server started: LMCache <code>lmcache_mp_lookup_hit_tokens_total / lmcache_mp_lookup_requested_tokens_total</code>,
vLLM external <code>vllm:external_prefix_cache_hits_total / vllm:external_prefix_cache_queries_total</code> (tokens LMCache served),
vLLM prefix <code>vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total</code> (vLLM's own cache).</p>'''

STATUS_TITLES = ('host', 'state', 'LMCache unit', 'vLLM unit', 'model', 'N', 'N source', 'vLLM', 'LMCache', 'GPUs',
                 'LMCache hit', 'vLLM external hit', 'vLLM prefix hit')

STATUS_END = ('<p class="note"><code>status.json</code> beside this file holds every host\'s full result '
              '(unit properties, endpoints, counters, GPUs).</p>')


def escape(value):
    """``value`` as HTML text or attribute (None is ``-``): ``html.escape`` with quotes."""
    return html.escape('-' if value is None else str(value), quote=True)


def md_cell(value):
    """``value`` as a Markdown table cell (None is ``-``; ``|`` escaped, one line)."""
    return ('-' if value is None else str(value)).replace('|', '\\|').replace('\n', ' ')


def _html_page(title, style, body):
    return '\n'.join(['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
                      '<meta name="viewport" content="width=device-width, initial-scale=1">',
                      '<title>%s</title>' % escape(title), style, '</head>', '<body>', '<h1>%s</h1>' % escape(title)]
                     + body + ['</body>', '</html>', ''])


def _head(titles):
    return ['<thead>', '<tr>%s</tr>' % ''.join('<th>%s</th>' % escape(t) for t in titles), '</thead>']


def _td(value, css=None, title=None):
    attributes = ' class="%s"' % escape(css) if css else ''
    if title is not None:
        attributes += ' title="%s"' % escape(title)
    return '<td%s>%s</td>' % (attributes, value)


def _list(css, heading, items):
    if not items:
        return []
    return (['<h2>%s</h2>' % heading, '<ul class="%s">' % css] + ['<li>%s</li>' % escape(i) for i in items]
            + ['</ul>'])


def _mnbt(row):
    return row['max_num_batched_tokens'] if row['max_num_batched_tokens'] is not None else 'vLLM default'


def plan_markdown(rows, groups, warnings):
    """The plan's ``fleet.md``: the hosts, the warnings, the probe groups and where the files are."""
    lines = ['# Fleet plan', '', PLAN_INTRO_MD.format(count=len(rows)), '',
             '| %s |' % ' | '.join(PLAN_TITLES), '|---|---|---|---|---:|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|']
    for r in rows:
        cells = (r['host'], r['model'], r['device'], r['gpu_kind'], r['tp'], r['gpus'] or '-', r['dtype'],
                 r['kv_cache_dtype'], '%s / %s' % (md_cell(r['conv_dtype']), md_cell(r['ssm_dtype'])), r['n'],
                 r['n_source'], r['expected'], r['chunk_size'], _mnbt(r), r['vllm_port'], r['lmcache_port'],
                 r['lmcache_http_port'])
        lines.append('| %s |' % ' | '.join(md_cell(c) for c in cells))
    if warnings:
        lines.extend(['', '## Warnings', ''] + ['- %s' % w for w in warnings])
    lines.extend([''] + PLAN_GROUPS.splitlines())
    for g in groups or []:
        lines.append('| %s | %d | %s | %s |' % (md_cell(g['name']), len(g['members']), md_cell(g['canary']),
                                                md_cell(', '.join(g['members'][1:]) or '-')))
    lines.extend(['', '## Files', '', PLAN_FILES.format(q='`', e='`', r='`<redacted>`'), ''])
    return '\n'.join(lines)


def _plan_html_row(r):
    mismatch = ' mismatch' if r['expected'] is not None and int(r['expected']) != r['n'] else ''
    cells = [_td(escape(r['host'])), _td(escape(r['model'])), _td(escape(r['device'])), _td(escape(r['gpu_kind'])),
             _td(escape(r['tp']), 'num'), _td(escape(r['gpus'] or '-')), _td(escape(r['dtype'])),
             _td(escape(r['kv_cache_dtype'])), _td('%s / %s' % (escape(r['conv_dtype']), escape(r['ssm_dtype']))),
             _td(escape(r['n']), 'num n'), _td(escape(r['n_source']), 'source-%s' % r['n_source']),
             _td(escape(r['expected']), 'num' + mismatch), _td(escape(r['chunk_size']), 'num'),
             _td(escape(_mnbt(r)), 'num'), _td(escape(r['vllm_port']), 'num'), _td(escape(r['lmcache_port']), 'num'),
             _td(escape(r['lmcache_http_port']), 'num')]
    return '<tr id="host-%s">%s</tr>' % (escape(r['host']), ''.join(cells))


def plan_html(rows, warnings):
    """The plan's ``fleet.html``: the hosts and the warnings, one self-contained page."""
    intro = PLAN_INTRO_HTML.format(count=len(rows))
    body = (['<p class="note">%s</p>' % intro, '<table>'] + _head(PLAN_TITLES) + ['<tbody>']
            + [_plan_html_row(r) for r in rows] + ['</tbody>', '</table>'] + _list('warnings', 'Warnings', warnings)
            + ['<p class="note">%s</p>' % PLAN_FILES.format(q='<code>', e='</code>', r='<code>&lt;redacted&gt;</code>')])
    return _html_page('Fleet plan', PLAN_STYLE, body)


def _status_html_row(r):
    n = escape(r.get('n_value'))
    if r.get('n_live') is not None and r.get('n_live') != r.get('n_value'):
        n += ' (running %s)' % escape(r['n_live'])
    vllm = escape(r.get('vllm_version') or '-')
    if r.get('vllm_package'):
        vllm += ' (%s)' % escape(r['vllm_package'])
    gpus = escape(r['gpus']) + ''.join('<span class="gpu">%s</span>' % escape(line) for line in r.get('gpu_lines') or [])
    cells = [_td(escape(r['host'])), _td(escape(r['state']), 'state-%s' % r['state']), _td(escape(r['lmcache'])),
             _td(escape(r['vllm'])), _td(escape(r['model'])), _td(n, 'num n'),
             _td(escape(r.get('n_source') or '-'), 'source-%s' % (r.get('n_source') or 'unknown'), r.get('n_detail') or ''),
             _td(vllm), _td(escape(r.get('lmcache_version') or '-')), _td(gpus), _td(escape(r['lmcache_hit']), 'num'),
             _td(escape(r['vllm_external_hit']), 'num'), _td(escape(r['vllm_prefix_hit']), 'num')]
    return '<tr id="host-%s">%s</tr>' % (escape(r['host']), ''.join(cells))


def status_html(rows):
    """The status ``fleet.html``: the count per state, the hosts and every problem, one self-contained page."""
    counts = {}
    for row in rows:
        counts[row['state']] = counts.get(row['state'], 0) + 1
    summary = '%d host(s)%s.' % (len(rows), ''.join(', %d %s' % (counts[s], escape(s)) for s in sorted(counts)))
    problems = [problem for row in rows for problem in row['problems']]
    body = (['<p class="note">%s' % summary, STATUS_NOTE, '<table>'] + _head(STATUS_TITLES) + ['<tbody>']
            + [_status_html_row(r) for r in rows] + ['</tbody>', '</table>'] + _list('problems', 'Problems', problems)
            + [STATUS_END])
    page = _html_page('Fleet status', STATUS_STYLE, body)
    return page
