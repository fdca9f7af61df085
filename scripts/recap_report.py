"""recap_report - `recap report LOG...`: what happened at each capture site,
as a table that fits the terminal, as JSON or as CSV.

Python 3 standard library only; imported by the recap command, which hands
it the parsed arguments (cmd_report) and reads logs through it for `recap
config` (read_logs, from recap_logs). The log schema is in recap_logs.py.
"""

import csv
import json
import re
import shutil
import sys
import textwrap

import recap_advice
from recap_logs import BETWEEN_CLASSES, STEP_CLASSES, add_steps
from recap_logs import read_logs  # noqa: F401  (recap config reads logs through here)


# ---- recap report ------------------------------------------------------------

def saved_us(site, mean_new_all):
    """reuses x mean 'new' instantiation time (this site's, else all sites')
    minus what the reuses cost; None when no 'new' time is known."""
    mean = site.inst_new_us / site.inst['new'] if site.inst['new'] else mean_new_all
    if site.reused == 0:
        return 0.0
    if mean is None:
        return None
    return site.reused * mean - site.reuse_us


def _mean_new(site):
    return site.inst_new_us / site.inst['new'] if site.inst['new'] else None


def step_per_period(step, saved=None):
    """Where a mean period went, in µs, from an end event's step sums (None
    where there is none): period, capture, instantiate, launch, each
    between-captures class and their sum (between); own, the program's own
    work: the period less all of them (derived, not measured; None where
    the parts add up to more than the period, as captures overlapping on
    several threads do); saved, what recap removed per period where the
    report estimates it (SAVED_MS over the periods; None otherwise); and
    calls, the mean calls per period of each class."""
    if not step or not step.get('periods'):
        return None
    n = step['periods']
    out = {'period': step['period_us'] / n}
    for c in STEP_CLASSES:
        out[c] = step[c + '_us'] / n
    out['between'] = sum(out[c] for c in BETWEEN_CLASSES)
    rest = out['capture'] + out['instantiate'] + out['launch'] + out['between']
    own = out['period'] - rest
    # A tenth of a µs per figure is rounding, not overlap.
    out['own'] = max(own, 0.0) if own > -0.1 * (len(STEP_CLASSES) + 1) / n else None
    out['saved'] = saved / n if saved is not None and saved > 0 else None
    out['calls'] = {c: step[c] / n for c in STEP_CLASSES}
    return out


def site_row(s, saved):
    return {
        'site': s.id, 'label': s.label, 'captures': s.captures,
        'recaptured': s.paths['recapture'], 'by_recap': s.paths['by_recap'],
        'fallbacks': s.paths['fallback'],
        'fresh': s.paths['fresh'], 'observed': s.paths['observe'],
        'eligible': s.eligible, 'ineligible': s.ineligible,
        'instantiations': sum(s.inst.values()), 'reused': s.reused,
        'failed_updates': s.failed_updates,
        'inst_new_us': s.inst_new_us, 'reuse_us': s.reuse_us,
        'saved_us': saved,
        'kept': s.kept, 'evicted': s.evicted, 'hits': s.hits, 'backoffs': s.backoffs,
        'fallback_reasons': dict(s.fallback_reasons.most_common()),
        'fallback_reasons_sampled': not s.fallback_reasons_exact,
        'fallbacks_logged': s.fallbacks_logged,
        'fresh_reasons': dict(s.fresh_reasons.most_common()),
        'fresh_reasons_sampled': not s.fresh_reasons_exact,
        'fallback_switch_calls': {r: {str(c): n for c, n in calls.most_common()}
                                  for r, calls in s.switch_calls.items()},
        'candidates': candidates_summary(s.candidates),
        'shapes_seen': s.shapes_seen, 'shapes_more': s.shapes_more,
        'step': s.step, 'step_per_period': step_per_period(s.step, saved),
    }


def candidates_summary(counter):
    """What the logged captures' "candidates" say: how many captures carried
    it, the mean and the most; None where none did."""
    logged = sum(counter.values())
    if not logged:
        return None
    return {'logged': logged, 'mean': sum(k * n for k, n in counter.items()) / logged,
            'max': max(counter)}


SUMMED = ('captures', 'recaptured', 'by_recap', 'fallbacks', 'fresh', 'observed', 'eligible', 'ineligible',
          'instantiations', 'reused', 'failed_updates', 'inst_new_us', 'reuse_us',
          'kept', 'evicted', 'hits', 'backoffs')


def sum_rows(rows):
    totals = {k: sum(r[k] for r in rows) for k in SUMMED}
    # Rows whose saving cannot be estimated add nothing to the total; with
    # none estimable at all, the total is unknown too.
    known = [r['saved_us'] for r in rows if r['saved_us'] is not None]
    totals['saved_us'] = sum(known) if known or not rows else None
    step = None
    for r in rows:
        step = add_steps(step, r.get('step'))
    totals['step'] = step
    saved = sum(r['saved_us'] for r in rows if r['saved_us'] is not None and r.get('step'))
    totals['step_per_period'] = step_per_period(step, saved)
    return totals


def rank_name(key):
    return str(key[1]) if key[0] == 0 else f'pid:{key[1]}'


def report_rows(logs):
    """Rows per site (summed over ranks) and their totals; with logs from
    more than one rank, also rows per site and rank, and totals per rank.
    A rank row's saving uses its own mean 'new' time, else the site's over
    all ranks, else all sites'; a site row's saving is then the sum of its
    rank rows', so every total is the sum of what it totals."""
    total_new = sum(s.inst['new'] for s in logs.sites.values())
    total_new_us = sum(s.inst_new_us for s in logs.sites.values())
    mean_all = total_new_us / total_new if total_new else None
    sites = sorted(logs.sites.values(), key=lambda s: (-s.captures, s.id))
    ranks, rows, by_rank = logs.ranks(), [], []
    for s in sites:
        per_rank = logs.rank_sites.get(s.id, {})
        site_mean = _mean_new(s) if _mean_new(s) is not None else mean_all
        rank_rows = [dict(site_row(per_rank[k], saved_us(per_rank[k], site_mean)),
                          label=s.label, rank=rank_name(k)) for k in ranks if k in per_rank]
        row = site_row(s, saved_us(s, mean_all))
        if len(ranks) > 1 and rank_rows:
            row['saved_us'] = sum_rows(rank_rows)['saved_us']
        rows.append(row)
        by_rank.extend(rank_rows)
    totals = sum_rows(rows)
    rank_totals = [dict(sum_rows([r for r in by_rank if r['rank'] == rank_name(k)]),
                        rank=rank_name(k)) for k in ranks] if len(ranks) > 1 else []
    return rows, totals, by_rank, rank_totals


def captured_nothing(logs):
    """The ranks whose processes captured nothing (a pytest worker that never
    made a graph, a rank that never reached the captured step), by name,
    and how many processes they are. A run of many processes has many of
    them, and a row of zeros each would bury the rows that say something."""
    procs = set(logs.starts) | set(logs.proc_sites) | set(logs.end_counts)
    captures = {k: 0 for k in logs.ranks()}
    for per_rank in logs.rank_sites.values():
        for key, site in per_rank.items():
            captures[key] += site.captures
    idle = sorted(k for k, n in captures.items() if not n)
    return [rank_name(k) for k in idle], sum(1 for p in procs if logs.rank_of(p) in idle)


def rank_summary(logs):
    """One entry per rank: its launcher variable, world size, pids, files."""
    out = {}
    for proc in sorted(set(logs.starts) | set(logs.proc_sites) | set(logs.end_counts), key=repr):
        key = logs.rank_of(proc)
        entry = out.setdefault(key, {'rank': rank_name(key), 'rank_var': None,
                                     'world_size': None, 'pids': [], 'files': []})
        start = logs.starts.get(proc, {})
        if isinstance(start.get('rank_var'), str):
            entry['rank_var'] = start['rank_var']
        if isinstance(start.get('world_size'), int) and not isinstance(start['world_size'], bool):
            entry['world_size'] = start['world_size']
        if proc[1] not in entry['pids']:
            entry['pids'] = sorted(entry['pids'] + [proc[1]],
                                   key=lambda p: (0, p, '') if isinstance(p, int) else (1, 0, repr(p)))
        if proc[0] not in entry['files']:
            entry['files'].append(proc[0])
    return [out[k] for k in sorted(out)]


def fmt_ms(us):
    return '-' if us is None else f'{us / 1000.0:.3f}'



def cmd_report(args):
    if args.html:
        return write_html(args)
    logs = read_logs(args.logs)
    rows, totals, by_rank, rank_totals = report_rows(logs)
    idle, idle_procs = captured_nothing(logs)
    for row in rows:
        row['advice'] = [dict(a._asdict()) for a in recap_advice.advise(logs.sites[row['site']])]
    if args.json:
        json.dump({'sites': rows, 'totals': totals, 'malformed_lines': logs.malformed,
                   'processes': len(logs.starts), 'warnings': logs.warnings,
                   'errors': logs.errors, 'unmatched': sorted(logs.unmatched),
                   'ranks': rank_summary(logs),
                   'by_rank': by_rank, 'rank_totals': rank_totals,
                   'processes_captured_nothing': idle_procs}, sys.stdout, indent=1)
        print()
    elif args.csv:
        write_csv(sys.stdout, rows, totals, by_rank, rank_totals)
    else:
        width = None if args.wide else shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
        for line in report_text(logs, rows, totals, by_rank, rank_totals, width,
                                (idle, idle_procs)):
            print(line)
    for problem in logs.unreadable:
        print(f'recap: cannot read {problem}', file=sys.stderr)
    return 1 if logs.unreadable else 0


def write_html(args):
    """recap report --html FILE: the page of the logs (recap_html)."""
    import recap_html
    logs = read_logs(args.logs, keep_events=True)
    for problem in logs.unreadable:
        print(f'recap: cannot read {problem}', file=sys.stderr)
    text = recap_html.page(logs, [p if p != '-' else '<stdin>' for p in args.logs],
                           advise=recap_advice.advise)
    try:
        if args.html == '-':
            sys.stdout.write(text)
        else:
            with open(args.html, 'w', encoding='utf-8') as f:
                f.write(text)
    except OSError as e:
        print(f'recap: cannot write {args.html}: {e.strerror}', file=sys.stderr)
        return 1
    if args.html != '-':
        lanes = sum(len(logs.proc_sites[p]) for p in recap_html.shown_processes(logs))
        print(f'recap: wrote {args.html} ({len(text.encode()) // 1024 + 1} KiB): '
              f'{len(logs.sites)} site(s), {lanes} lane(s), '
              f'{len(logs.starts)} process(es)')
    if logs.malformed:
        print(f'recap: {logs.malformed} malformed line(s) skipped; first at '
              f'{logs.first_malformed}', file=sys.stderr)
    return 1 if logs.unreadable else 0


# ---- the table ------------------------------------------------------------------
#
# Columns come in groups, each under its name. Where the table is wider than
# the terminal (COLUMNS, else the terminal's own width, else 100 columns
# when not a terminal): labels are shortened in the middle (directories
# first, so file and line stay readable), down to MIN_LABEL; where that is
# not enough, the groups are printed in blocks one above the other, each
# block with the site, label (and rank) columns again; and columns that
# are 0 in every row and say little then are left out where that saves a
# block (a note names them).
# --wide prints one table with everything.

KEYS = (('SITE', 'site'), ('LABEL', 'label'))
RANK_KEY = ('RANK', 'rank')
GROUPS = (
    ('captures', (('CAPTURES', 'captures'), ('RECAPTURED', 'recaptured'),
                  ('BY_RECAP', 'by_recap'))),
    ('not recaptured', (('FALLBACKS', 'fallbacks'), ('FRESH', 'fresh'),
                        ('OBSERVED', 'observed'))),
    ('changed nodes', (('ELIGIBLE', 'eligible'), ('INELIGIBLE', 'ineligible'))),
    ('executables', (('REUSED', 'reused'), ('SAVED_MS', 'saved_us'))),
    ('kept graphs', (('KEPT', 'kept'), ('EVICTED', 'evicted'), ('HITS', 'hits'),
                     ('BACKOFFS', 'backoffs'))),
)
COLUMNS = KEYS + tuple(c for _, cols in GROUPS for c in cols)
# Never left out, even at 0: a 0 here is news.
ALWAYS_SHOWN = ('captures', 'recaptured', 'fallbacks', 'reused', 'saved_us')
DEFAULT_WIDTH = 100
LEFT_OUT_NAMED = 8          # ranks named in the line on those that captured nothing
MIN_LABEL = 30
SEP = '  '

# A file and line of a label ("/a/b/c.py:12"): its directories can go first.
FILE_LINE = re.compile(r'(?P<dir>(?:[^\s/<>()]*/)+)(?P<base>[^\s/<>()]+:\d+)')


def shorten_middle(text, width):
    """text cut in the middle to width columns, '...' where it was cut."""
    if len(text) <= width:
        return text
    if width <= 3:
        return text[:width]
    head = (width - 3 + 1) // 2
    tail = width - 3 - head
    return text[:head] + '...' + (text[-tail:] if tail else '')


def _short_folders(text, width, matches):
    """text with the folders of the matched files cut from the left, one
    file after the other, until it fits ('...' where they were)."""
    for m in matches:
        excess = len(text) - width
        if excess <= 0:
            break
        folder = m.group('dir')
        keep = len(folder) - excess - 3
        short = '...' + folder[-keep:] if keep > 1 else '.../'
        if len(short) < len(folder):
            text = text[:m.start('dir')] + short + text[m.end('dir'):]
    return text


def shorten_label(text, width):
    """A label cut to width columns so that its file and line stay readable.
    A default label reads "[RANGE @ ]FILE:LINE (FUNCTION)[ < FILE:LINE
    (FUNCTION)]": first the folders go, the caller's then the capture's
    own; then the caller's part (' < ...', or nothing where even that
    does not fit, and then the capture's '.../' too); then the middle of
    the capture's file name, keeping its extension and line; last the
    middle of what is left. '...' marks each cut."""
    if len(text) <= width:
        return text
    cut = text.find(' < ')
    own, caller = (text[:cut], text[cut:]) if cut >= 0 else (text, '')
    caller = _short_folders(caller, width - len(own), reversed(list(FILE_LINE.finditer(caller))))
    if len(own) + len(caller) > width:
        own = _short_folders(own, width - len(caller), reversed(list(FILE_LINE.finditer(own))))
    if caller and len(own) + len(caller) > width:
        caller = ' < ...' if len(own) + 6 <= width else ''
    text = own + caller
    if len(text) > width and caller != ' < ...':
        own = own.replace('.../', '', 1)
        text = own + caller
    if len(text) <= width:
        return text
    m = FILE_LINE.search(own) or re.search(r'(?P<base>[^\s/<>()]+:\d+)', own)
    if m:
        base = m.group('base')
        stem, _, rest = base.rpartition('.') if '.' in base.split(':')[0] else (base, '', '')
        if stem and rest:
            rest = '.' + rest
        else:
            stem, rest = base.split(':')[0], base[len(base.split(':')[0]):]
        room = len(stem) - (len(text) - width)
        if room >= 4:
            text = text[:m.start('base')] + shorten_middle(stem, room) + rest + text[m.end('base'):]
            if len(text) <= width:
                return text
    return shorten_middle(text, width)


def cell(row, key):
    v = row.get(key)
    if key == 'saved_us':
        return fmt_ms(v)
    return '-' if v is None else str(v)


def _pack(spans, room):
    """Groups (their widths, in order) packed greedily into blocks no wider
    than room; None where one group alone is wider."""
    blocks, used = [], None
    for i, span in enumerate(spans):
        need = len(SEP) + span
        if need > room:
            return None
        if used is not None and used + need <= room:
            blocks[-1].append(i)
            used += need
        else:
            blocks.append([i])
            used = need
    return blocks


def _plan(fixed, natural_label, spans, width):
    """(label width, blocks of group indices): the fewest blocks, then the
    widest label, with the label no narrower than MIN_LABEL (or its own
    width); every group alone where even that does not fit."""
    if width is None:
        return natural_label, [list(range(len(spans)))]
    narrowest = min(natural_label, MIN_LABEL)
    best = None
    for label in range(natural_label, narrowest - 1, -1):
        blocks = _pack(spans, width - fixed - label)
        if blocks is not None and (best is None or len(blocks) < len(best[1])):
            best = (label, blocks)
            if len(blocks) == 1:
                break
    return best or (narrowest, [[i] for i in range(len(spans))])


def table_lines(keys, lines, footer, width, groups=GROUPS):
    """The table of lines (then a rule, then footer rows) fitted to width
    (None: as wide as it needs), and the headers of the columns left out."""
    rows = lines + footer
    label_at = [k for _, k in keys].index('label')
    key_cells = [[h] + [cell(r, k) for r in rows] for h, k in keys]
    key_widths = [max(map(len, c)) for c in key_cells]
    fixed = sum(key_widths) - key_widths[label_at] + len(SEP) * (len(keys) - 1)

    def laid_out(hide):
        """The groups with the columns not hidden, their cells, and their
        widths (the last column wider where the group's name is)."""
        kept = [(name, [(h, k) for h, k in cols if k not in hide]) for name, cols in groups]
        kept = [(name, cols) for name, cols in kept if cols]
        cells = [[[h] + [cell(r, k) for r in rows] for h, k in cols] for _, cols in kept]
        widths = [[max(map(len, c)) for c in g] for g in cells]
        for (name, _), w in zip(kept, widths):
            w[-1] += max(0, len(name) - sum(w) - len(SEP) * (len(w) - 1))
        spans = [sum(w) + len(SEP) * (len(w) - 1) for w in widths]
        return kept, cells, widths, _plan(fixed, key_widths[label_at], spans, width)

    kept, cells, widths, (label_width, blocks) = laid_out(())
    hidden = []
    if len(blocks) > 1:
        zero = [k for _, cols in groups for h, k in cols if k not in ALWAYS_SHOWN
                and all(cell(r, k) == '0' for r in rows)]
        other = laid_out(zero)
        if len(other[3][1]) < len(blocks):
            kept, cells, widths, (label_width, blocks) = other
            hidden = [h for _, cols in groups for h, k in cols if k in zero]
    key_cells[label_at] = [key_cells[label_at][0]] + [
        shorten_label(t, label_width) for t in key_cells[label_at][1:]]
    key_widths[label_at] = max(map(len, key_cells[label_at]))
    out = []
    for block in blocks:
        if out:
            out.append('')
        columns = list(zip(key_cells, key_widths, [True, True] + [False] * (len(keys) - 2)))
        titles = [''.ljust(w) for w in key_widths]
        for g in block:
            span = sum(widths[g]) + len(SEP) * (len(widths[g]) - 1)
            titles.append((kept[g][0] + ' ' + '-' * span)[:span])
            columns += [(c, w, False) for c, w in zip(cells[g], widths[g])]
        out.append(SEP.join(titles).rstrip())
        for n in range(len(rows) + 1):
            if n == len(rows) + 1 - len(footer):
                out.append(SEP.join('-' * w for _, w, _ in columns))
            out.append(SEP.join(c[n].ljust(w) if left else c[n].rjust(w)
                                for c, w, left in columns).rstrip())
    return out, hidden


def site_table(rows, totals, width):
    return table_lines(KEYS, rows, [dict(totals, site='total', label='')], width)


def rank_table(rows, totals, by_rank, rank_totals, width, idle=()):
    """One table for a run of several ranks: per site, a row per rank and an
    `all` row; below the rule, a total per rank and the total over all.
    The ranks named in idle (they captured nothing) get no rows. An `all`
    row is left out where it would repeat the one rank row above it: with
    many processes most sites are one process's own, and doubled rows
    would hide the sites that several share."""
    keys = KEYS + (RANK_KEY,)
    lines = []
    for row in rows:
        shown = [r for r in by_rank if r['site'] == row['site'] and r['rank'] not in idle]
        lines += shown
        if len(shown) != 1:
            lines.append(dict(row, rank='all'))
    footer = [dict(t, site='total', label='') for t in rank_totals if t['rank'] not in idle]
    if len(footer) != 1:
        footer.append(dict(totals, site='total', label='', rank='all'))
    return table_lines(keys, lines, footer, width)


def wrapped(text, width, indent='', hanging='  '):
    if width is None:
        return [indent + text]
    return textwrap.wrap(text, max(width, 40), initial_indent=indent,
                         subsequent_indent=indent + hanging, break_on_hyphens=False,
                         break_long_words=False) or ['']


def site_heading(site, width, indent='  '):
    """A site's id and label on one line, the label shortened to fit."""
    if not site.label:
        return indent + site.id
    room = None if width is None else max(width - len(indent) - 18, MIN_LABEL)
    return f'{indent}{site.id}  {site.label if room is None else shorten_label(site.label, room)}'


def fallback_lines(logs, rows, width):
    """Per site with fallbacks: each reason and how many fell back for it,
    exact where the end events count them, else what the capture events
    logged (then marked sampled)."""
    out = []
    for row in rows:
        if not row['fallbacks']:
            continue
        site = logs.sites[row['site']]
        if not out:
            out += ['', 'Fallbacks by reason:']
        out.append(site_heading(site, width))
        head = f'{row["fallbacks"]} of {row["captures"]} captures fell back'
        if not site.fallback_reasons_exact:
            head += (f'; sampled: the log holds {site.fallbacks_logged} of them, the counts '
                     'below are of those')
        cand = candidates_summary(site.candidates)
        if cand:
            head += (f'; captures were matched against {cand["mean"]:.1f} kept graph(s) on '
                     f'average, {cand["max"]} at most')
        out += wrapped(head, width, '    ')
        for reason, n in site.fallback_reasons.most_common():
            calls = site.switch_calls.get(reason)
            where = recap_advice.switched_at(calls)
            out += wrapped(f'{n:>7}  {reason}' + (f' ({where})' if where else ''), width,
                           '    ', ' ' * 9)
    return out


FIRST_CAPTURE = 'first capture at this site'   # shim/repeat/capture.c's reason


def driver_lines(logs, rows, width):
    """Per site with captures left to the driver for a reason other than
    being its first in a process: each reason and how many, exact where the
    end events count them (fresh_reasons), else what the capture events
    logged (then marked sampled)."""
    out = []
    for row in rows:
        site = logs.sites[row['site']]
        others = [(n, r) for r, n in site.fresh_reasons.items() if r != FIRST_CAPTURE]
        if not others:
            continue
        if not out:
            out += ['', 'Left to the driver by reason (each process\'s first capture at a site '
                        'aside):']
        out.append(site_heading(site, width))
        head = f'{row["fresh"]} of {row["captures"]} captures were the driver\'s'
        if not site.fresh_reasons_exact:
            head += '; sampled: the counts below are of the captures the log holds'
        out += wrapped(head, width, '    ')
        for n, reason in sorted(others, key=lambda nr: (-nr[0], nr[1])):
            out += wrapped(f'{n:>7}  {reason}', width, '    ', ' ' * 9)
    return out


def memory_lines(logs, width):
    """One line on the memory recap handed back instead of the driver
    allocating it again (end events only); none where there was none."""
    sites = [s for s in logs.sites.values() if s.memory_reused]
    host = logs.host_memory
    parts = []
    if sites:
        blocks = sum(s.memory_reused for s in sites)
        mib = sum(s.memory_reused_bytes for s in sites) / (1 << 20)
        parts.append(f'device memory {blocks} time(s) ({mib:.1f} MiB) at {len(sites)} site(s)')
    if host['reused']:
        parts.append(f'pinned host memory {host["reused"]} time(s) '
                     f'({host["reused_bytes"] / (1 << 20):.1f} MiB)')
    if not parts:
        return []
    return wrapped('Memory the program freed and took again, handed back by recap with no '
                   'driver call: ' + '; '.join(parts), width)


def footer_lines(logs, width, left_out=((), 0)):
    """The lines below the table; left_out: the ranks the table left out
    (they captured nothing) and how many processes they are."""
    out = ['']
    ended = sum(1 for k in logs.starts if k in logs.ends)
    out.append(f'{len(logs.starts)} process(es), {ended} with an end event; '
               f'{logs.lines} lines read; {len(logs.sites)} site(s)')
    idle, idle_procs = left_out
    if idle_procs:
        named = [n if n.startswith('pid:') else f'rank {n}' for n in idle[:LEFT_OUT_NAMED]]
        names = ', '.join(named) + (
            f', and {len(idle) - LEFT_OUT_NAMED} more' if len(idle) > LEFT_OUT_NAMED else '')
        out += wrapped(f'{idle_procs} process(es) captured nothing and are left out '
                       f'({names})', width)
    out += memory_lines(logs, width)
    if len(logs.starts) > ended:
        out.append(f'note: {len(logs.starts) - ended} process(es) have no end event '
                   '(killed, or still running)')
    out += rank_lines(logs)
    if logs.malformed:
        out.append(f'{logs.malformed} malformed line(s) skipped; first at {logs.first_malformed}')
    if logs.unmatched:
        out.append('RECAP_SITES entries that selected no site: ' +
                   ', '.join(repr(e) for e in sorted(logs.unmatched)))
    if logs.warnings or logs.errors:
        out.append(f'{logs.warnings} warning(s), {logs.errors} error(s):')
        for (kind, message), n in logs.messages.most_common(5):
            out.append(f'  {n} x {kind}: {message}')
    out += wrapped('SAVED_MS: reuses x mean "new" instantiation time (the site\'s, else all '
                   'sites\') minus the reuses\' own time; "-" when no instantiation time is '
                   'known.', width)
    return out


def report_text(logs, rows, totals, by_rank, rank_totals, width, left_out=((), 0)):
    """Everything `recap report` prints without --json or --csv; left_out
    as captured_nothing gives it (a single rank's table has no rank rows
    to leave out)."""
    if rank_totals:
        out, hidden = rank_table(rows, totals, by_rank, rank_totals, width, left_out[0])
    else:
        out, hidden = site_table(rows, totals, width)
        left_out = ((), 0)
    out += footer_lines(logs, width, left_out)
    if hidden:
        out += wrapped(f'Not shown, 0 in every row: {", ".join(hidden)} (--wide shows every '
                       'column).', width)
    out += fallback_lines(logs, rows, width)
    out += driver_lines(logs, rows, width)
    out += step_lines(logs, rows, width)
    out += advice_lines(logs, rows, width)
    return out


def _times(us_values, period):
    """Formats µs figures in one unit chosen by the period: (unit, [text])."""
    if period >= 1000:
        return 'ms', [f'{v / 1000:.2f}' for v in us_values]
    return 'µs', [f'{v:.1f}' for v in us_values]


def _calls(n):
    return f'{n:.0f}' if abs(n - round(n)) < 0.05 else f'{n:.1f}'


STEP_WORDS = {'alloc': 'alloc', 'free': 'free', 'host_alloc': 'host alloc',
              'host_free': 'host free', 'sync': 'sync'}


def step_text(step, per):
    """One line: where a mean period of the site went (step_per_period)."""
    parts = [per['period'], per['capture'], per['instantiate'], per['launch'], per['between']]
    between = [c for c in BETWEEN_CLASSES if step[c]]
    unit, text = _times(parts + [per[c] for c in between] +
                        [per['own'] or 0.0, per['saved'] or 0.0], per['period'])
    period, capture, inst, launch, driver = text[:5]
    detail = text[5:5 + len(between)]
    own, saved = text[-2:]
    calls = ', '.join(f'{_calls(per["calls"][c])} {STEP_WORDS[c]} {t}'
                      for c, t in zip(between, detail))
    line = (f'period {period} {unit} = capture {capture} + instantiate {inst} + launch {launch} '
            f'+ driver between captures {driver}' + (f' ({calls})' if calls else '') +
            (f' + program\'s own {own}' if per['own'] is not None else
             ' + program\'s own - (the parts overlap: captures on several threads at once)'))
    line += f'  [{step["periods"]:,} periods'
    if per['saved'] is not None:
        line += f'; recap saved about {saved} {unit} a period in instantiations (estimated)'
    return line + ']'


def step_lines(logs, rows, width):
    """Per site whose end event counted a period: where its step time went,
    a mean period, one line (step_text)."""
    out = []
    for row in rows:
        per = row.get('step_per_period')
        if not per:
            continue
        if not out:
            out += [''] + wrapped('Where a step\'s time goes (mean per period, from one capture '
                                  'begin at the site to the next; program\'s own = the period '
                                  'less the rest):', width)
        out.append(site_heading(logs.sites[row['site']], width))
        out += wrapped(step_text(row['step'], per), width, '    ', '  ')
    return out


def advice_lines(logs, rows, width):
    """Per site with advice (recap_advice), its lines, each naming the
    figures it rests on."""
    out = []
    for row in rows:
        if not row.get('advice'):
            continue
        if not out:
            out += ['', 'What the program could change (from this log\'s figures):']
        out.append(site_heading(logs.sites[row['site']], width))
        for advice in row['advice']:
            out += wrapped(f'- {advice["text"]}', width, '    ', '  ')
    return out


def rank_lines(logs):
    """What the logs say about the run's ranks, and what looks wrong: a rank
    logged by several processes, world sizes that disagree, ranks missing."""
    summary = rank_summary(logs)
    out = []
    if not summary:
        return out
    named = [e for e in summary if e['rank_var']]
    if named:
        variables = sorted({e['rank_var'] for e in named})
        sizes = sorted({e['world_size'] for e in named if e['world_size'] is not None})
        size_text = (f' of world size {sizes[0]}' if len(sizes) == 1 else
                     f'; world sizes disagree: {", ".join(map(str, sizes))}' if sizes else '')
        out.append(f'ranks {", ".join(e["rank"] for e in named)}{size_text} '
                   f'(from {", ".join(variables)})')
        if len(sizes) == 1:
            missing = sorted(set(range(sizes[0])) - {int(e['rank']) for e in named})
            if missing:
                shown = ', '.join(map(str, missing[:16])) + (', ...' if len(missing) > 16 else '')
                out.append(f'note: no log from rank(s) {shown}')
    unnamed = [e for e in summary if not e['rank_var']]
    if unnamed and len(summary) > 1:
        out.append(f'{len(unnamed)} process(es) without a rank variable, shown by pid')
    for e in summary:
        if len(e['pids']) > 1:
            out.append(f'note: rank {e["rank"]} was logged by {len(e["pids"])} processes (pids '
                       f'{", ".join(map(str, e["pids"]))}): a restart, or children; summed')
    return out


# ---- CSV ------------------------------------------------------------------------

CSV_KEYS = ('site', 'label', 'rank') + tuple(k for _, k in COLUMNS[2:] if k != 'saved_us') + (
    'instantiations', 'failed_updates', 'inst_new_us', 'reuse_us', 'saved_us',
    'fallback_reasons', 'fallback_reasons_sampled')


def write_csv(stream, rows, totals, by_rank, rank_totals):
    """The table's rows as CSV with the JSON's keys: per site a row per rank
    (several ranks only) and an `all` row, then the totals (site `total`).
    Unlike the table it keeps every row, as the JSON does: a script picking
    the `all` rows must find every site, and a rank's zeros are a fact.
    Times in microseconds; fallback_reasons as a JSON object."""
    out = csv.writer(stream, lineterminator='\n')
    out.writerow(CSV_KEYS)
    lines = []
    for row in rows:
        if rank_totals:
            lines.extend(r for r in by_rank if r['site'] == row['site'])
        lines.append(dict(row, rank='all'))
    lines += [dict(t, site='total', label='') for t in rank_totals]
    lines.append(dict(totals, site='total', label='', rank='all'))
    for r in lines:
        values = []
        for k in CSV_KEYS:
            v = r.get(k)
            if k == 'fallback_reasons':
                v = json.dumps(v, ensure_ascii=False) if v is not None else ''
            elif isinstance(v, bool):
                v = 'true' if v else 'false'
            elif isinstance(v, float):
                v = f'{v:.1f}'
            values.append('' if v is None else v)
        out.writerow(values)
