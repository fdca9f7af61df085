"""recap_html - `recap report --html FILE LOG...`: one self-contained page
(inline SVG and CSS, a few lines of script; nothing fetched) that shows
what recap did at each capture site as a timeline.

Per process (a rank, else a pid) a group of lanes, one per site: its
logged captures in order, each marked by its path and as tall as it took
(log scale); the instantiations that followed, by kind; back-off spans;
and, from the site's timeline event, every capture per window of captures
(the path mix and the time per capture), which is what the thinned
routine events leave out. Hovering a mark gives its figures and reason;
each lane lists its fallback and fresh-capture reasons, its frames and
NVTX range, and its totals as the table counts them. Where the log holds
fewer events than the end event counts, the lane says so. Processes of
ranks that captured nothing get no group. Above the lanes, the totals per
site, a line each (the whole label and the frames on hover).

Large logs stay small: a lane draws at most MARKS marks per row (the page
at most PAGE_MARKS); past that its logged events are drawn in bins, one
mark per bin with the bin's figures.

Python 3 standard library only; imported by recap_report.
"""

import collections
import html
import math

import recap_report as report
from recap_advice import us_text
from recap_logs import Capture, Instantiation, call_text

WIDTH = 1000                  # the lanes' SVG coordinate width
PLOT_X0, PLOT_X1 = 96, 990    # where capture numbers are drawn
MARKS = 300                   # at most this many marks per row of a lane
PAGE_MARKS = 1600             # ... and over the page's rows, lanes sharing it
MIN_MARKS = 24
# The totals table's label cell: one line of at most this many characters,
# shortened as the text table shortens labels (file and line kept); a whole
# label wrapped in the cell made each row several lines high. The whole
# label and the site's frames are the cell's hover text. With the headers at
# 10px that fits beside the other columns in a 1280-pixel window; narrower,
# the cell cuts the label's end (CSS ellipsis) so that the table still fits.
LABEL_CELL = 36

# Capture paths as the page names and colours them, in drawing order.
PATHS = (('recap', 'recorded by recap', '#2f9e44'),
         ('driver', 'recaptured by the driver', '#1c7ed6'),
         ('fallback', 'fallback', '#e03131'),
         ('fresh', 'fresh', '#f59f00'),
         ('observe', 'observed', '#868e96'))
HOWS = (('new', 'new instantiation', '#c2255c'),
        ('update', 'update', '#7048e8'),
        ('delta', 'delta (changed nodes only)', '#0c8599'),
        ('reuse', 'reuse (nothing changed)', '#82c91e'))
# Where a step's time goes (report.step_per_period), in drawing order:
# key, name, colour, and how the figure is known.
STEP_PARTS = (('capture', 'capture', '#1c7ed6', 'measured'),
              ('instantiate', 'instantiation', '#c2255c', 'measured'),
              ('launch', 'graph launch', '#0c8599', 'measured'),
              ('alloc', 'device allocation', '#e8590c', 'measured'),
              ('free', 'device free', '#fd7e14', 'measured'),
              ('host_alloc', 'pinned host allocation', '#f59f00', 'measured'),
              ('host_free', 'pinned host free', '#fcc419', 'measured'),
              ('sync', 'synchronisation', '#868e96', 'measured'),
              ('own', "program's own work", '#dee2e6', 'derived: the period less the rest'),
              ('saved', 'removed by recap', '#d3f9d8',
               'estimated: instantiation time the reuses saved (SAVED_MS), per period'))
STEP_BAR = (180, 840)         # where a step bar may run, in its SVG's coordinates
PATH_NAME = {k: name for k, name, _ in PATHS}
HOW_NAME = {k: name for k, name, _ in HOWS}
# Timeline keys by page key.
TIMELINE_PATH = {'recap': 'by_recap', 'driver': 'by_driver', 'fallback': 'fallback',
                 'fresh': 'fresh', 'observe': 'observe'}

CSS = '''
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px;
       color: #212529; background: #fff; max-width: 1240px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 6px; border-bottom: 2px solid #dee2e6; }
h3 { font-size: 14px; margin: 0; font-weight: 600; overflow-wrap: anywhere; }
code, pre { font: 12px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; }
.meta, .note, .figures { color: #495057; margin: 2px 0; }
.note { color: #9c6500; }
.lane { border: 1px solid #dee2e6; border-radius: 6px; padding: 8px 10px; margin: 10px 0; }
.lane svg { width: 100%; height: auto; display: block; margin: 4px 0; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; font-size: 11px; }
th, td { padding: 2px 4px; text-align: right; border-bottom: 1px solid #e9ecef; }
th { font-weight: 600; font-size: 10px; }
th:nth-child(-n+2), td:nth-child(-n+2) { text-align: left; }
td.label { min-width: 8em; max-width: 0; width: 100%; white-space: nowrap; overflow: hidden;
           text-overflow: ellipsis; }
td.label[title] { cursor: help; }
tr.groups th { font-weight: normal; color: #868e96; text-align: left;
               border-bottom: 1px solid #ced4da; }
tr.total td { font-weight: 600; border-top: 2px solid #adb5bd; }
details { margin: 2px 0; } summary { cursor: pointer; color: #1864ab; }
ul { margin: 2px 0 2px 18px; padding: 0; }
.legend span { display: inline-block; margin-right: 12px; white-space: nowrap; }
.legend i { display: inline-block; width: 11px; height: 11px; margin-right: 4px;
            vertical-align: -1px; border-radius: 2px; }
.advice { background: #f1f8ff; border-left: 3px solid #1c7ed6; padding: 4px 8px; margin: 4px 0; }
svg text { font: 11px system-ui, sans-serif; fill: #495057; }
.steps table { width: 100%; }
.steps td.label { width: 28%; max-width: 16em; }
.steps td.bar { width: 72%; min-width: 24em; text-align: left; }
.steps td { vertical-align: top; }
.steps svg { width: 100%; height: auto; display: block; }
svg .s-saved { stroke: #2f9e44; stroke-dasharray: 3 2; }
svg text.top { font-size: 9px; fill: #868e96; }
svg .axis { stroke: #ced4da; stroke-width: 1; }
svg .backoff { fill: #ffe066; fill-opacity: .55; }
svg .tick { stroke: #495057; stroke-width: 1.5; }
svg .time { fill: #495057; }
''' + ''.join(f'svg .c-{k} {{ fill: {c}; }}\n' for k, _, c in PATHS) \
    + ''.join(f'svg .i-{k} {{ fill: {c}; }}\n' for k, _, c in HOWS) \
    + ''.join(f'svg .s-{k} {{ fill: {c}; }}\n' for k, _, c, _ in STEP_PARTS)

# Records how long the page took from its first byte to laid out, and how
# tall it is (the browser test and scripts/report-screenshot read them
# from the DOM).
SCRIPT = '''addEventListener('load', function () {
  var b = document.body, nav = performance.getEntriesByType('navigation')[0];
  b.getBoundingClientRect();
  b.dataset.renderMs = Math.round(performance.now() - (nav ? nav.responseStart : 0));
  b.dataset.height = document.documentElement.scrollHeight;
});'''


def esc(text):
    return html.escape(str(text), quote=True)


def num(n):
    return f'{n:,}'


def capture_key(c):
    if c.path == 'recapture':
        return 'recap' if c.by == 'recap' else 'driver'
    return c.path


# ---- scales -------------------------------------------------------------------------

class Scale:
    """Capture numbers 1..n onto the plot's x range; microseconds onto a
    bar height (log scale from 1 µs to the row's most)."""

    def __init__(self, n, top_us, height):
        self.n = max(n, 1)
        self.step = (PLOT_X1 - PLOT_X0) / self.n
        self.top = math.log10(max(top_us, 10.0))
        self.height = height

    def x(self, seq):
        return PLOT_X0 + (min(max(seq, 1), self.n) - 1) * self.step

    def span(self, first, last):
        """x and width of captures first..last."""
        x0 = self.x(first)
        return x0, max(self.x(last) + self.step - x0, 1.0)

    def h(self, us):
        if us <= 1.0:
            return 1.5
        return max(1.5, self.height * min(math.log10(us) / self.top, 1.0))

    def width(self):
        return min(max(self.step * 0.8, 1.0), 8.0)


def rect(cls, x, y, w, h, title=None):
    body = f'<rect class="{cls}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"'
    if title is None:
        return body + '/>'
    return body + f'><title>{esc(title)}</title></rect>'


# ---- one lane -----------------------------------------------------------------------

def capture_title(c):
    parts = [f'capture {num(c.seq)}: {PATH_NAME.get(capture_key(c), c.path)}']
    if c.reason:
        parts[0] += f' - {c.reason}'
    parts.append(f'{num(c.nodes)} nodes, {num(c.changed)} changed ({num(c.eligible)} eligible, '
                 f'{num(c.ineligible)} ineligible)')
    parts.append(us_text(c.us))
    if c.candidates is not None:
        parts.append(f'matched against {c.candidates} kept graph(s)')
    if c.switch_call is not None:
        parts.append(f'switched to a driver capture at {call_text(c.switch_call)}')
    if c.result:
        parts.append(f'the program got {c.result}')
    return '; '.join(parts)


def inst_title(i):
    text = f'instantiation {num(i.seq)}: {HOW_NAME.get(i.how, i.how)}, {us_text(i.us)}'
    if i.after:
        text += f' (after capture {num(i.after)})'
    if i.reason:
        text += f' - {i.reason}'
    return text


def bins_of(items, pos, n, count):
    """items grouped by position into count bins over 1..n: [(first, last,
    [items])], empty bins left out."""
    size = max(1, math.ceil(n / count))
    out = {}
    for item in items:
        b = (max(pos(item), 1) - 1) // size
        out.setdefault(b, []).append(item)
    return [(b * size + 1, min((b + 1) * size, n), out[b]) for b in sorted(out)]


def capture_marks(captures, scale, y0, budget):
    out = []
    if len(captures) <= budget:
        w = scale.width()
        for c in captures:
            h = scale.h(c.us)
            out.append(rect(f'c-{capture_key(c)}', scale.x(c.seq), y0 + scale.height - h, w, h,
                            capture_title(c)))
        return out
    for first, last, group in bins_of(captures, lambda c: c.seq, scale.n, budget):
        kinds = collections.Counter(capture_key(c) for c in group)
        reasons = collections.Counter(c.reason for c in group if c.reason)
        top = max(c.us for c in group)
        mean = sum(c.us for c in group) / len(group)
        title = (f'captures {num(first)}-{num(last)}, {len(group)} logged: ' +
                 ', '.join(f'{kinds[k]} {PATH_NAME[k]}' for k, _, _ in PATHS if kinds[k]) +
                 f'; {us_text(mean)} mean, {us_text(top)} most' +
                 ''.join(f'; {r} ({n}x)' for r, n in reasons.most_common(2)))
        x, w = scale.span(first, last)
        h = scale.h(top)
        y = y0 + scale.height - h
        out.append(f'<g><title>{esc(title)}</title>')
        for k, part in stacked(kinds, h, least=min(2.0, h / len(kinds))):
            out.append(rect(f'c-{k}', x, y, w, part))
            y += part
        out.append('</g>')
    return out


def inst_marks(insts, scale, y0, budget):
    out = []
    pos = (lambda i: i.after or i.seq)
    if len(insts) <= budget:
        w = scale.width()
        for i in insts:
            h = scale.h(i.us)
            out.append(rect(f'i-{i.how}', scale.x(pos(i)), y0 + scale.height - h, w, h,
                            inst_title(i)))
        return out
    for first, last, group in bins_of(insts, pos, scale.n, budget):
        kinds = collections.Counter(i.how for i in group)
        top = max(i.us for i in group)
        title = (f'instantiations after captures {num(first)}-{num(last)}, {len(group)} '
                 'logged: ' + ', '.join(f'{kinds[k]} {k}' for k, _, _ in HOWS if kinds[k]) +
                 f'; {us_text(top)} most')
        x, w = scale.span(first, last)
        h = scale.h(top)
        y = y0 + scale.height - h
        out.append(f'<g><title>{esc(title)}</title>')
        for k, _, _ in HOWS:
            if kinds[k]:
                part = h * kinds[k] / len(group)
                out.append(rect(f'i-{k}', x, y, w, part))
                y += part
        out.append('</g>')
    return out


def stacked(counts, height, least=2.0):
    """(key, height) per nonzero count in PATHS' order, proportional but
    none under least (a few fallbacks among thousands stay visible)."""
    keys = [k for k, _, _ in PATHS if counts.get(k)]
    total = sum(counts[k] for k in keys)
    if not total:
        return []
    parts = {k: height * counts[k] / total for k in keys}
    small = [k for k in keys if parts[k] < least]
    if small and len(small) < len(keys):
        spare = height - least * len(small)
        big = sum(parts[k] for k in keys if k not in small)
        parts = {k: least if k in small else parts[k] * spare / big for k in keys}
    return [(k, parts[k]) for k in keys]


def timeline_marks(t, scale, y_mix, mix_h, time_scale, y_time):
    """The site's every capture per window: the path mix, then the time per
    capture (capture and instantiation) on its own log scale."""
    out = []
    for w in range(t['windows']):
        first = w * t['window'] + 1
        last = min((w + 1) * t['window'], scale.n)
        counts = {k: t[TIMELINE_PATH[k]][w] for k, _, _ in PATHS}
        insts = {k: t[k][w] for k, _, _ in HOWS}
        captures = sum(counts.values())
        if not captures and not sum(insts.values()):
            continue
        cap_us, inst_us = t['capture_us'][w], t['inst_us'][w]
        per = (cap_us + inst_us) / captures if captures else 0.0
        title = (f'captures {num(first)}-{num(last)}: ' +
                 (', '.join(f'{num(counts[k])} {PATH_NAME[k]}' for k, _, _ in PATHS
                            if counts[k]) or 'none ended') +
                 '; instantiations: ' +
                 (', '.join(f'{num(insts[k])} {k}' for k, _, _ in HOWS if insts[k]) or 'none') +
                 (f'; {us_text(per)} per capture (capturing {us_text(cap_us / captures)}, '
                  f'instantiating {us_text(inst_us / captures)})' if captures else ''))
        x, width = scale.span(first, last)
        out.append(f'<g><title>{esc(title)}</title>')
        y = y_mix
        for k, part in stacked(counts, mix_h):
            out.append(rect(f'c-{k}', x, y, width, part))
            y += part
        if captures:
            h = time_scale.h(per)
            out.append(rect('time', x + width * 0.15, y_time + time_scale.height - h,
                            max(width * 0.7, 1.0), h))
        out.append('</g>')
    return out


def reuse_marks(reuse, scale, y0, height):
    """Back-off spans (drawn first, under the marks) and ticks where the
    site resumed or started typing shapes."""
    bands, out = [], []
    for r in reuse:
        at = r.seq if r.seq is not None else r.after
        where = (f'at capture {num(at)}' if r.seq is not None else
                 f'after capture {num(at)} (the last logged before it)')
        if r.state == 'stopped' and r.backoff:
            x, w = scale.span(at + 1, at + r.backoff)
            title = (f'back-off {where}: keeps nothing and looks for nothing for '
                     f'{num(r.backoff)} captures - {r.reason or "no reason given"}')
            bands.append(rect('backoff', x, y0, w, height, title))
        else:
            x = scale.x(max(at, 1))
            title = f'{r.state} {where}' + (f' - {r.reason}' if r.reason else '')
            out.append(f'<line class="tick" x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" '
                       f'y2="{y0 + height}"><title>{esc(title)}</title></line>')
    return bands + out


def axis(scale, y):
    out = [f'<line class="axis" x1="{PLOT_X0}" y1="{y}" x2="{PLOT_X1}" y2="{y}"/>']
    ticks = sorted({1, scale.n} | {round(scale.n * f) for f in (0.25, 0.5, 0.75)})
    for t in ticks:
        if t < 1:
            continue
        x = scale.x(t) + scale.width() / 2
        anchor = 'start' if t == 1 else 'end' if t == scale.n else 'middle'
        out.append(f'<text x="{x:.1f}" y="{y + 12}" text-anchor="{anchor}">{num(t)}</text>')
    return out


def lane_svg(site, n, budget):
    """The lane's picture: rows of captures, instantiations, and where the
    site has a timeline, its every capture per window."""
    captures = [e for e in site.events if isinstance(e, Capture)]
    insts = [e for e in site.events if isinstance(e, Instantiation)]
    cap = Scale(n, max([c.us for c in captures], default=10.0), 40)
    inst = Scale(n, max([i.us for i in insts], default=10.0), 26)
    t = site.timeline
    rows = [('captures', 0, 44), ('instantiations', 48, 30)]
    y = 82
    if t:
        per = [(t['capture_us'][w] + t['inst_us'][w]) /
               max(sum(t[TIMELINE_PATH[k]][w] for k, _, _ in PATHS), 1)
               for w in range(t['windows'])]
        time_scale = Scale(n, max(per, default=10.0), 26)
        rows += [('all captures', y, 12), ('µs / capture', y + 14, 28)]
        y += 46
    height = y + 16
    out = [f'<svg viewBox="0 0 {WIDTH} {height}" role="img" '
           f'aria-label="timeline of site {site.id}">']
    for name, y0, h in rows:
        out.append(f'<text x="0" y="{y0 + h - 2}">{esc(name)}</text>')
    out += reuse_marks(site.reuse, cap, 0, 78)
    out += capture_marks(captures, cap, 2, budget)
    out.append(f'<text class="top" x="0" y="14">top {esc(us_text(10 ** cap.top))}</text>')
    out += inst_marks(insts, inst, 50, budget)
    if t:
        out += timeline_marks(t, cap, 84, 10, time_scale, 96)
        out.append(f'<text class="top" x="0" y="107">top '
                   f'{esc(us_text(10 ** time_scale.top))}</text>')
    out += axis(cap, y + 1)
    out.append('</svg>')
    return '\n'.join(out)


def reason_list(title, counter, note=''):
    if not counter:
        return ''
    items = ''.join(f'<li>{num(n)} &times; {esc(r)}</li>' for r, n in counter.most_common())
    return (f'<details><summary>{esc(title)} ({num(sum(counter.values()))}{esc(note)})'
            f'</summary><ul>{items}</ul></details>')


def frames_lines(site):
    """The site's NVTX range, Python frames and C frames, a line each."""
    parts = []
    if site.nvtx:
        parts.append(f'NVTX range: {site.nvtx}')
    if site.python_frames:
        parts.append(f'Python frames (GIL {site.gil or "unknown"} at the capture):')
        parts += [f'  {f}' for f in site.python_frames]
    if site.frames:
        parts.append('C frames' + (f' (the first {site.c_frames} in the id)'
                                   if site.c_frames is not None and site.c_frames <
                                   len(site.frames) else '') + ':')
        parts += [f'  {f}' for f in site.frames]
    return parts


def frames_block(site):
    parts = frames_lines(site)
    if not parts:
        return ''
    return (f'<details><summary>frames and range</summary><pre>{esc(chr(10).join(parts))}'
            '</pre></details>')


def site_name(site):
    """A site as the page names it: its label, else its first C frame."""
    return site.label or '(no label)' + (f' · {site.frames[0]}' if site.frames else '')


def label_cell(site):
    """The table's label cell: the short label, and on hover (a title, which
    keeps the page free of script) the whole label and every frame."""
    name = site_name(site)
    hover = '\n'.join([name] + frames_lines(site))
    return (f'<td class="label" title="{esc(hover)}">'
            f'{esc(report.shorten_label(name, LABEL_CELL))}</td>')


def lane(number, proc_site, site, row, n, budget, advice, ended):
    captures = sum(1 for e in proc_site.events if isinstance(e, Capture))
    kinds = [f'{num(row["recaptured"])} recaptured ({num(row["by_recap"])} by recap)',
             f'{num(row["fallbacks"])} fallbacks', f'{num(row["fresh"])} fresh',
             f'{num(row["observed"])} observed']
    figures = (f'{num(row["captures"])} captures: {", ".join(kinds)} &middot; '
               f'{num(row["reused"])} of {num(row["instantiations"])} instantiations reused '
               f'&middot; saved {esc(report.fmt_ms(row["saved_us"]))} ms &middot; '
               f'kept {num(row["kept"])}, evicted {num(row["evicted"])} &middot; '
               f'{num(row["backoffs"])} back-offs')
    notes = []
    if captures < row['captures']:
        source = 'the end event counts' if ended else 'its events count'
        notes.append(f'The log holds {num(captures)} of this site\'s {num(row["captures"])} '
                     f'captures ({source} all of them; routine events are written for the '
                     'first 64 captures and then at powers of two): the marks are those '
                     'logged' + (f'; the "all captures" rows count every one, '
                                 f'{num(proc_site.timeline["window"])} to a bar.'
                                 if proc_site.timeline else '.'))
    if not ended:
        notes.append('No end event from this process (killed, or still running): its '
                     'figures count logged events only.')
    sampled = ', sampled' if proc_site.fallbacks_logged < row['fallbacks'] and \
        not proc_site.fallback_reasons_exact else ''
    label = site_name(site)
    return ''.join([
        f'<section class="lane" id="lane-{number}" '
        f'data-site="{esc(site.id)}" data-captures="{row["captures"]}" '
        f'data-logged-captures="{captures}" data-recaptured="{row["recaptured"]}" '
        f'data-fallbacks="{row["fallbacks"]}" data-fresh="{row["fresh"]}" '
        f'data-observed="{row["observed"]}" data-reused="{row["reused"]}" '
        f'data-kept="{row["kept"]}" data-evicted="{row["evicted"]}">',
        f'<h3><span class="label">{esc(label)}</span> <code>{esc(site.id)}</code></h3>',
        f'<p class="figures">{figures}</p>',
        ''.join(f'<p class="note">{esc(n)}</p>' for n in notes),
        ''.join(f'<p class="advice">{esc(a)}</p>' for a in advice),
        lane_svg(proc_site, n, budget),
        reason_list('fallbacks by reason', proc_site.fallback_reasons, sampled),
        reason_list('fresh captures by reason' + ('' if proc_site.fresh_reasons_exact
                                                  else ' (logged)'), proc_site.fresh_reasons),
        reason_list('failed executable updates by reason (logged)',
                    proc_site.update_fail_reasons),
        reason_list('warnings and errors', collections.Counter(
            {f'{k}: {m}': c for (k, m), c in site.messages.items()})),
        frames_block(site),
        '</section>'])


# ---- the page -----------------------------------------------------------------------

def totals_table(rows, totals, sites):
    """The table per site (sites: logs.sites, for the labels' frames)."""
    columns = report.COLUMNS
    groups = '<th colspan="2"></th>' + ''.join(
        f'<th colspan="{len(cols)}">{esc(name)}</th>' for name, cols in report.GROUPS)
    head = f'<tr class="groups">{groups}</tr><tr>' + ''.join(
        f'<th>{esc(h)}</th>' for h, _ in columns) + '</tr>'
    body = []
    for r in rows + [dict(totals, site='total', label='')]:
        cls = ' class="total"' if r['site'] == 'total' else ''
        cells = []
        for _, k in columns:
            if k != 'label':
                cells.append(f'<td>{esc(report.cell(r, k))}</td>')
            elif r['site'] in sites:
                cells.append(label_cell(sites[r['site']]))
            else:
                cells.append('<td class="label"></td>')
        body.append(f'<tr{cls}>{"".join(cells)}</tr>')
    return f'<div class="wide"><table>{head}{"".join(body)}</table></div>'


def step_bar(row, scale_us):
    """One site's mean period as a stacked bar (what recap measured, the
    program's own work derived from it, and what recap removed where the
    report estimates it), scaled so that scale_us fills the bar's room."""
    per, step = row['step_per_period'], row['step']
    x0, x1 = STEP_BAR
    room = x1 - x0
    unit, (period,) = report._times([per['period']], per['period'])
    out = [f'<svg viewBox="0 0 1000 22" role="img" aria-label="step time of site {row["site"]}">',
           f'<text x="0" y="15">period {esc(period)} {esc(unit)}</text>',
           f'<g class="step" data-site="{esc(row["site"])}" data-period-us="{per["period"]:.1f}" '
           f'data-periods="{step["periods"]}">']
    x = float(x0)
    for key, name, _, how in STEP_PARTS:
        us = per.get(key)
        if not us or us <= 0:
            continue
        w = room * us / scale_us
        calls = per['calls'].get(key)
        count = f', {report._calls(calls)} call(s)' if calls else ''
        title = f'{name}: {us_text(us)} a period{count} ({how})'
        out.append(f'<rect class="s-{key}" data-us="{us:.1f}" x="{x:.1f}" y="3" '
                   f'width="{max(w, 0.5):.1f}" height="16"><title>{esc(title)}</title></rect>')
        x += w
    out.append('</g>')
    if per['own'] is None:
        out.append(f'<text x="{min(x + 6, 990):.1f}" y="15">the parts overlap (several threads)'
                   '</text>')
    out.append('</svg>')
    return '\n'.join(out)


def step_section(rows, sites):
    """Per site whose log counted a period: where a mean period went, as a
    bar; nothing where no site has one."""
    shown = [r for r in rows if r.get('step_per_period')]
    if not shown:
        return ''
    scale = max(r['step_per_period']['period'] + (r['step_per_period']['saved'] or 0.0)
                for r in shown) or 1.0
    items = ''.join(f'<span><i style="background:{c}"></i>{esc(name)}</span>'
                    for _, name, c, _ in STEP_PARTS)
    body = []
    for r in shown:
        label = label_cell(sites[r['site']]) if r['site'] in sites else '<td class="label"></td>'
        text = report.step_text(r['step'], r['step_per_period'])
        body.append(f'<tr>{label}<td class="bar">{step_bar(r, scale)}'
                    f'<p class="figures">{esc(text)}</p></td></tr>')
    return ('<h2>Where a step\'s time goes</h2>'
            f'<p class="legend">{items}</p>'
            '<p class="meta">A mean period per site, from one capture begin at the site to the '
            'next. Captures, instantiations, launches and the driver calls between captures '
            'are measured; the program\'s own work is the period less them (derived); what '
            'recap removed is the instantiation time its reuses saved, per period (estimated, '
            'as SAVED_MS): without recap a period would have been about that much longer. '
            'Hover a part for its figure.</p>'
            f'<div class="steps"><table>{"".join(body)}</table></div>')


def legend():
    items = [f'<span><i style="background:{c}"></i>{esc(name)}</span>' for _, name, c in PATHS]
    items += [f'<span><i style="background:{c}"></i>{esc(name)}</span>' for _, name, c in HOWS]
    items.append('<span><i style="background:#ffe066"></i>back-off</span>')
    return ('<p class="legend">' + ''.join(items) + '</p><p class="meta">Bars are as tall as '
            'the capture or instantiation took (log scale, up to the row\'s "top"); hover one '
            'for its figures and reason.</p>')


def process_rows(logs, proc):
    """The table's figures per site for one process: its own mean "new" time,
    else the site's over all processes, else all sites'."""
    total_new = sum(s.inst['new'] for s in logs.sites.values())
    mean_all = (sum(s.inst_new_us for s in logs.sites.values()) / total_new
                if total_new else None)
    out = {}
    for site_id, s in logs.proc_sites.get(proc, {}).items():
        whole = logs.sites[site_id]
        mean = (whole.inst_new_us / whole.inst['new'] if whole.inst['new'] else mean_all)
        out[site_id] = report.site_row(s, report.saved_us(s, mean))
    return out


def shown_processes(logs):
    """The processes the page draws, ranks in order: those with sites, less
    those of ranks that captured nothing (as in the text table)."""
    idle, _ = report.captured_nothing(logs)
    return sorted((p for p in logs.proc_sites if logs.proc_sites[p]
                   and report.rank_name(logs.rank_of(p)) not in idle),
                  key=lambda p: (logs.rank_of(p), repr(p)))


def page(logs, paths, advise=None):
    """The whole page as text. advise(site, about) -> [Advice]: the advice
    for one process's site (about: the site over all processes)."""
    rows, totals, _, _ = report.report_rows(logs)
    _, idle_procs = report.captured_nothing(logs)
    procs = shown_processes(logs)
    lanes = sum(len(logs.proc_sites[p]) for p in procs)
    budget = max(MIN_MARKS, min(MARKS, PAGE_MARKS // max(2 * lanes, 1)))
    order = {r['site']: i for i, r in enumerate(rows)}
    body, lanes_done = [], 1
    for proc in procs:
        sites = logs.proc_sites[proc]
        key = logs.rank_of(proc)
        start = logs.starts.get(proc, {})
        who = f'rank {key[1]}' if key[0] == 0 else f'pid {key[1]}'
        if key[0] == 0:
            who += f', pid {proc[1]}'
        ended = proc in logs.ends
        prows = process_rows(logs, proc)
        ptotal = report.sum_rows(list(prows.values()))
        body.append(f'<section class="group" data-rank="{esc(report.rank_name(key))}" '
                    f'data-pid="{esc(proc[1])}" data-lanes="{len(sites)}">')
        body.append(f'<h2>{esc(who)}</h2><p class="meta">{esc(proc[0])}'
                    f'{" &middot; " + esc(start["exe"]) if isinstance(start.get("exe"), str) else ""}'
                    f' &middot; {num(ptotal["captures"])} captures, {num(ptotal["reused"])} '
                    f'reused, saved {esc(report.fmt_ms(ptotal["saved_us"]))} ms</p>')
        for site_id in sorted(sites, key=lambda s: (order.get(s, len(order)), s)):
            ps, row = sites[site_id], prows[site_id]
            n = max([row['captures'], ps.max_seq] +
                    ([(ps.timeline['windows'] - 1) * ps.timeline['window'] + 1]
                     if ps.timeline else []))
            advice = [a.text for a in advise(ps, logs.sites[site_id])] if advise else []
            body.append(lane(lanes_done, ps, logs.sites[site_id], row, n, budget, advice,
                             ended and site_id in logs.end_counts.get(proc, {})))
            lanes_done += 1
        body.append('</section>')
    ended = sum(1 for k in logs.starts if k in logs.ends)
    names = ', '.join(paths)
    head = (f'<header><h1>recap report</h1><p class="meta">{esc(names)} &middot; '
            f'{len(logs.starts)} process(es), {ended} with an end event &middot; '
            + (f'{idle_procs} process(es) captured nothing and are left out &middot; '
               if idle_procs else '') +
            f'{len(logs.sites)} site(s) &middot; {num(logs.lines)} lines'
            + (f' &middot; {logs.malformed} malformed, first at {esc(logs.first_malformed)}'
               if logs.malformed else '') + '</p></header>')
    return ''.join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<title>recap report: {esc(names)}</title><style>{CSS}</style></head>\n',
        f'<body data-sites="{len(logs.sites)}" data-lanes="{lanes}">', head,
        '<h2>Totals per site</h2>', totals_table(rows, totals, logs.sites),
        '<p class="meta">SAVED_MS: reuses &times; mean "new" instantiation time (the '
        'site\'s, else all sites\') minus the reuses\' own time.</p>',
        step_section(rows, logs.sites),
        '<h2>Timeline</h2>', legend(), '\n'.join(body),
        f'<script>{SCRIPT}</script></body></html>\n'])
