"""recap_report - `recap report LOG...`: read recap's logs (JSON Lines) and
print what happened at each capture site, as a table or as JSON.

Python 3 standard library only; imported by the recap command, which hands
it the parsed arguments (cmd_report) and reads logs through it for `recap
config` (read_logs).

Log schema (JSON Lines, one object per line, "event" first, then "pid"):

  start        version (str), exe (str), driver (int such as 13000, or null),
               recapture_api (bool), mode (str), sites (str: RECAP_SITES),
               config (path or null), log (path), rank (int or null: from
               the launcher variable rank_var, e.g. RANK under torchrun),
               rank_var (str or null), world_size (int or null),
               stack_depth (int),
               python_skip (str or null: the configuration's extra skip list)
  site         site (16 hex digits), frames (array of "module+0xOFF symbol+0xOFF"),
               label (str or null), mode (effective mode at the site),
               python (absent without Python frames: version (str), gil
               ("held" | "released" at the first capture), frames (array of
               "FILE:LINE (FUNCTION)", innermost first)), nvtx (str or null:
               the innermost NVTX range), c_frames (int: how many of frames
               went into the id)
  capture      site, seq (per site, from 1), path ("recapture" | "fresh" |
               "fallback" | "observe"), reason (str or null), nodes, changed,
               eligible, ineligible, errors (ints), us (float, microseconds)
  instantiate  site, seq, how ("new" | "update" | "delta" | "reuse"),
               reason (str or null; a "new" whose reason contains "fail" is an
               executable update that failed and fell back to instantiation),
               us (float)
  reuse        site, state ("stopped" | "resumed" | "typed"), reason, backoff
               (captures until it tries again), hits, misses; "typed": an
               update between two graphs of one node count failed, so the
               site's shapes count node types and edges from then on
  warning      site (or null), message
  error        site (or null), message
  end          sites (array of objects: site, captures, recaptured, fallbacks,
               fresh, observed, nodes, changed, eligible, ineligible, errors,
               capture_us, instantiations, reused, new, update, delta, reuse,
               update_failures, hits, misses, backoffs, inst_new_us, reuse_us,
               kept, evicted),
               totals (object with the same counters summed, and
               budget_bytes, kept_bytes_peak), unmatched
               (array of the RECAP_SITES entries that selected no site),
               resolved (object: dlsym = wrappers dlsym on a driver handle
               handed out, procaddr = cuGetProcAddress answers)

Routine events (the same path or how, and reason, as the site's previous
event) are written for a site's first 64 captures and then at every power of
two (start carries "routine_events_full"); every other event is always
written. So `report` and `config` take a process's counters from its end
event, which is exact, and count events only for processes without one
(killed, or still running). A process is (log file, pid); its rank is the
start event's rank, else its pid (shown as pid:N). Any line may carry "truncated": true (the
writer cut it to fit); malformed lines are counted, never fatal.
"""

import collections
import json
import re
import sys

SITE_RE = re.compile(r'^[0-9a-f]{16}$')
CAPTURE_PATHS = ('recapture', 'fresh', 'fallback', 'observe')
INSTANTIATE_HOWS = ('new', 'update', 'delta', 'reuse')


# ---- reading logs ------------------------------------------------------------

class Site:
    """Everything the logs say about one capture site, merged over logs."""

    def __init__(self, site_id):
        self.id = site_id
        self.frames = []
        self.label = None
        self.python_frames = []
        self.gil = None
        self.nvtx = None
        self.c_frames = None
        self.modes = collections.Counter()
        self.captures = 0
        self.paths = collections.Counter()
        self.fallback_reasons = collections.Counter()
        self.fresh_reasons = collections.Counter()
        self.nodes = 0
        self.changed = 0
        self.eligible = 0
        self.ineligible = 0
        self.errors = 0
        self.capture_us = 0.0
        self.inst = collections.Counter()
        self.inst_new_us = 0.0
        self.reuse_us = 0.0
        self.failed_updates = 0
        self.update_fail_reasons = collections.Counter()
        self.warnings = 0
        # what recap kept for the site (end events only)
        self.kept = 0
        self.evicted = 0
        self.hits = 0
        self.backoffs = 0

    @property
    def reused(self):
        return self.inst['update'] + self.inst['delta'] + self.inst['reuse']


class Logs:
    def __init__(self):
        self.sites = {}
        self.order = []
        self.malformed = 0
        self.first_malformed = None
        self.lines = 0
        self.starts = {}          # (file, pid) -> start event
        self.ends = set()
        self.warnings = 0
        self.errors = 0
        self.messages = collections.Counter()
        self.unreadable = []
        self.proc_sites = {}      # (file, pid) -> {site id: Site} from events
        self.end_counts = {}      # (file, pid) -> {site id: counters of its end event}
        self.site_proc_modes = {} # site id -> [(file, pid, mode of its site event)]
        self.unmatched = collections.Counter()   # RECAP_SITES entries that selected nothing
        self.rank_sites = {}      # site id -> {rank key: Site summed over its processes}

    def rank_of(self, proc):
        """A process's rank key: (0, rank) from its start event's launcher
        variable, else (1, pid); sorts ranks first, in order."""
        start = self.starts.get(proc, {})
        rank = start.get('rank')
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            return (0, rank)
        pid = proc[1]
        return (1, pid if isinstance(pid, int) and not isinstance(pid, bool) else -1)

    def ranks(self):
        keys = {self.rank_of(p) for p in set(self.starts) | set(self.proc_sites)
                | set(self.end_counts)}
        return sorted(keys)

    def proc_site(self, source, pid, site_id):
        sites = self.proc_sites.setdefault((source, pid), {})
        if site_id not in sites:
            sites[site_id] = Site(site_id)
        self.site(site_id)        # keeps the order of first appearance
        return sites[site_id]

    def site(self, site_id):
        if site_id not in self.sites:
            self.sites[site_id] = Site(site_id)
            self.order.append(site_id)
        return self.sites[site_id]

    def bad(self, where, why):
        self.malformed += 1
        if self.first_malformed is None:
            self.first_malformed = f'{where}: {why}'


def _int(ev, key):
    v = ev.get(key, 0)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f'"{key}" is not an integer')
    return v


def _num(ev, key):
    v = ev.get(key, 0.0)
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f'"{key}" is not a number')
    return float(v)


def _site_id(ev):
    s = ev.get('site')
    if not isinstance(s, str) or not SITE_RE.match(s):
        raise ValueError('"site" is not 16 lower-case hex digits')
    return s


def _text(ev, key):
    v = ev.get(key)
    if v is not None and not isinstance(v, str):
        raise ValueError(f'"{key}" is not a string')
    return v


def read_event(logs, ev, source):
    kind = ev.get('event')
    if kind == 'start':
        logs.starts[(source, ev.get('pid'))] = ev
    elif kind == 'end':
        counts = {}
        for entry in ev.get('sites') or []:
            if isinstance(entry, dict) and isinstance(entry.get('site'), str) \
                    and SITE_RE.match(entry['site']):
                counts[entry['site']] = entry
        logs.ends.add((source, ev.get('pid')))
        logs.end_counts[(source, ev.get('pid'))] = counts
        for entry in ev.get('unmatched') or []:
            if isinstance(entry, str):
                logs.unmatched[entry] += 1
    elif kind == 'site':
        site = logs.site(_site_id(ev))
        frames = ev.get('frames') or []
        if not isinstance(frames, list) or not all(isinstance(f, str) for f in frames):
            raise ValueError('"frames" is not an array of strings')
        if not site.frames:
            site.frames = frames
        label = _text(ev, 'label')
        if label and not site.label:
            site.label = label
        mode = _text(ev, 'mode')
        if mode:
            site.modes[mode] += 1
            logs.site_proc_modes.setdefault(site.id, []).append((source, ev.get('pid'), mode))
        python = ev.get('python')
        if isinstance(python, dict) and not site.python_frames:
            frames = python.get('frames') or []
            if isinstance(frames, list) and all(isinstance(f, str) for f in frames):
                site.python_frames = frames
            site.gil = python.get('gil') if isinstance(python.get('gil'), str) else None
        nvtx = _text(ev, 'nvtx')
        if nvtx and not site.nvtx:
            site.nvtx = nvtx
        c_frames = ev.get('c_frames')
        if isinstance(c_frames, int) and not isinstance(c_frames, bool) and site.c_frames is None:
            site.c_frames = c_frames
    elif kind == 'capture':
        site_id = _site_id(ev)
        path = ev.get('path')
        if path not in CAPTURE_PATHS:
            raise ValueError(f'"path" is {path!r}, expected one of {", ".join(CAPTURE_PATHS)}')
        values = {k: _int(ev, k) for k in ('nodes', 'changed', 'eligible', 'ineligible', 'errors')}
        us = _num(ev, 'us')
        reason = _text(ev, 'reason')
        site = logs.proc_site(source, ev.get('pid'), site_id)
        site.captures += 1
        site.paths[path] += 1
        if path == 'recapture' and ev.get('by') == 'recap':
            site.paths['by_recap'] += 1
        site.nodes += values['nodes']
        site.changed += values['changed']
        site.eligible += values['eligible']
        site.ineligible += values['ineligible']
        site.errors += values['errors']
        site.capture_us += us
        if path == 'fallback':
            site.fallback_reasons[reason or 'no reason given'] += 1
        elif path == 'fresh' and reason:
            site.fresh_reasons[reason] += 1
    elif kind == 'instantiate':
        site_id = _site_id(ev)
        how = ev.get('how')
        if how not in INSTANTIATE_HOWS:
            raise ValueError(f'"how" is {how!r}, expected one of {", ".join(INSTANTIATE_HOWS)}')
        us = _num(ev, 'us')
        reason = _text(ev, 'reason')
        site = logs.proc_site(source, ev.get('pid'), site_id)
        site.inst[how] += 1
        if how == 'new':
            site.inst_new_us += us
            if reason and 'fail' in reason.lower():
                site.failed_updates += 1
                site.update_fail_reasons[reason] += 1
        else:
            site.reuse_us += us
    elif kind in ('warning', 'error'):
        message = _text(ev, 'message') or ''
        s = ev.get('site')
        if s is not None:
            logs.site(_site_id(ev)).warnings += 1
        if kind == 'warning':
            logs.warnings += 1
        else:
            logs.errors += 1
        logs.messages[(kind, message)] += 1
    elif not isinstance(kind, str):
        raise ValueError('no "event" string')
    # other events: newer writers may add some; they are not malformed


def _apply_end_counts(site, counts):
    """Replaces what sampled events say with the exact counters of an end
    event (reasons and warnings stay as the events gave them)."""
    def n(key):
        v = counts.get(key, 0)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
    site.captures = int(n('captures'))
    site.paths = collections.Counter({'recapture': int(n('recaptured')),
                                      'by_recap': int(n('by_recap')),
                                      'fallback': int(n('fallbacks')),
                                      'fresh': int(n('fresh')), 'observe': int(n('observed'))})
    for key in ('nodes', 'changed', 'eligible', 'ineligible', 'errors'):
        setattr(site, key, int(n(key)))
    site.capture_us = float(n('capture_us'))
    site.inst = collections.Counter({how: int(n(how)) for how in INSTANTIATE_HOWS})
    site.inst_new_us = float(n('inst_new_us'))
    site.reuse_us = float(n('reuse_us'))
    site.failed_updates = int(n('update_failures'))
    for key in ('kept', 'evicted', 'hits', 'backoffs'):
        setattr(site, key, int(n(key)))


def _merge_site(into, site):
    for key in ('captures', 'nodes', 'changed', 'eligible', 'ineligible', 'errors',
                'capture_us', 'inst_new_us', 'reuse_us', 'failed_updates', 'warnings',
                'kept', 'evicted', 'hits', 'backoffs'):
        setattr(into, key, getattr(into, key) + getattr(site, key))
    for key in ('paths', 'fallback_reasons', 'fresh_reasons', 'inst', 'update_fail_reasons'):
        getattr(into, key).update(getattr(site, key))


def _merge_processes(logs):
    """Per process: the end event's counters where it has one, else what its
    events say; then summed per site over processes (one per rank, say),
    and per site and rank (processes of one rank: a restart, fork children)."""
    procs = set(logs.proc_sites) | set(logs.end_counts)
    for proc in sorted(procs, key=repr):
        sites = logs.proc_sites.get(proc, {})
        for site_id, counts in logs.end_counts.get(proc, {}).items():
            if site_id not in sites:
                sites[site_id] = Site(site_id)
                logs.site(site_id)
            _apply_end_counts(sites[site_id], counts)
        rank = logs.rank_of(proc)
        for site_id, site in sites.items():
            _merge_site(logs.site(site_id), site)
            per_rank = logs.rank_sites.setdefault(site_id, {})
            if rank not in per_rank:
                per_rank[rank] = Site(site_id)
            _merge_site(per_rank[rank], site)


def read_logs(paths):
    logs = Logs()
    for path in paths:
        try:
            if path == '-':
                stream, name = sys.stdin.buffer, '<stdin>'
            else:
                stream, name = open(path, 'rb'), path
        except OSError as e:
            logs.unreadable.append(f'{path}: {e.strerror}')
            continue
        with stream:
            for number, raw in enumerate(stream, 1):
                where = f'{name}:{number}'
                if not raw.strip():
                    continue
                logs.lines += 1
                try:
                    ev = json.loads(raw.decode('utf-8'))
                except (UnicodeDecodeError, ValueError):
                    logs.bad(where, 'not a JSON line' if raw.endswith(b'\n')
                             else 'incomplete last line')
                    continue
                if not isinstance(ev, dict):
                    logs.bad(where, 'not a JSON object')
                    continue
                try:
                    read_event(logs, ev, name)
                except ValueError as e:
                    logs.bad(where, str(e))
    _merge_processes(logs)
    return logs


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
    }


SUMMED = ('captures', 'recaptured', 'by_recap', 'fallbacks', 'fresh', 'observed', 'eligible', 'ineligible',
          'instantiations', 'reused', 'failed_updates', 'inst_new_us', 'reuse_us',
          'kept', 'evicted', 'hits', 'backoffs')


def sum_rows(rows):
    totals = {k: sum(r[k] for r in rows) for k in SUMMED}
    # Rows whose saving cannot be estimated add nothing to the total; with
    # none estimable at all, the total is unknown too.
    known = [r['saved_us'] for r in rows if r['saved_us'] is not None]
    totals['saved_us'] = sum(known) if known or not rows else None
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
    logs = read_logs(args.logs)
    rows, totals, by_rank, rank_totals = report_rows(logs)
    if args.json:
        json.dump({'sites': rows, 'totals': totals, 'malformed_lines': logs.malformed,
                   'processes': len(logs.starts), 'warnings': logs.warnings,
                   'errors': logs.errors, 'unmatched': sorted(logs.unmatched),
                   'ranks': rank_summary(logs),
                   'by_rank': by_rank, 'rank_totals': rank_totals}, sys.stdout, indent=1)
        print()
    elif rank_totals:
        print_rank_table(rows, totals, by_rank, rank_totals)
        print_footer(logs)
    else:
        print_table(rows, totals)
        print_footer(logs)
    for problem in logs.unreadable:
        print(f'recap: cannot read {problem}', file=sys.stderr)
    return 1 if logs.unreadable else 0


COLUMNS = (('SITE', 'site'), ('LABEL', 'label'), ('CAPTURES', 'captures'),
           ('RECAPTURED', 'recaptured'), ('BY_RECAP', 'by_recap'), ('FALLBACKS', 'fallbacks'),
           ('FRESH', 'fresh'),
           ('OBSERVED', 'observed'), ('ELIGIBLE', 'eligible'), ('INELIGIBLE', 'ineligible'),
           ('REUSED', 'reused'), ('KEPT', 'kept'), ('EVICTED', 'evicted'), ('HITS', 'hits'),
           ('BACKOFFS', 'backoffs'), ('SAVED_MS', 'saved_us'))


def print_table(rows, totals):
    render_table(COLUMNS, rows, [dict(totals, site='total', label='')])


def print_rank_table(rows, totals, by_rank, rank_totals):
    """One table for a run of several ranks: per site, a row per rank and an
    `all` row; below the line, a total per rank and the total over all."""
    columns = COLUMNS[:2] + (('RANK', 'rank'),) + COLUMNS[2:]
    lines = []
    for row in rows:
        mine = [r for r in by_rank if r['site'] == row['site']]
        lines.extend(mine)
        lines.append(dict(row, rank='all'))
    footer = [dict(t, site='total', label='') for t in rank_totals]
    footer.append(dict(totals, site='total', label='', rank='all'))
    render_table(columns, lines, footer)


def render_table(columns, lines, footer):
    def cell(row, key):
        v = row.get(key)
        if key == 'saved_us':
            return fmt_ms(v)
        return '-' if v is None else str(v)
    table = [[h for h, _ in columns]]
    table += [[cell(r, k) for _, k in columns] for r in lines + footer]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for n, line in enumerate(table):
        if n == len(table) - len(footer):
            print('  '.join('-' * w for w in widths))
        out = [text.ljust(widths[i]) if i < 2 else text.rjust(widths[i])
               for i, text in enumerate(line)]
        print('  '.join(out).rstrip())


def print_ranks(logs):
    """What the logs say about the run's ranks, and what looks wrong: a rank
    logged by several processes, world sizes that disagree, ranks missing."""
    summary = rank_summary(logs)
    if not summary:
        return
    named = [e for e in summary if e['rank_var']]
    if named:
        variables = sorted({e['rank_var'] for e in named})
        sizes = sorted({e['world_size'] for e in named if e['world_size'] is not None})
        size_text = (f' of world size {sizes[0]}' if len(sizes) == 1 else
                     f'; world sizes disagree: {", ".join(map(str, sizes))}' if sizes else '')
        print(f'ranks {", ".join(e["rank"] for e in named)}{size_text} '
              f'(from {", ".join(variables)})')
        if len(sizes) == 1:
            missing = sorted(set(range(sizes[0])) - {int(e['rank']) for e in named})
            if missing:
                shown = ', '.join(map(str, missing[:16])) + (', ...' if len(missing) > 16 else '')
                print(f'note: no log from rank(s) {shown}')
    unnamed = [e for e in summary if not e['rank_var']]
    if unnamed and len(summary) > 1:
        print(f'{len(unnamed)} process(es) without a rank variable, shown by pid')
    for e in summary:
        if len(e['pids']) > 1:
            print(f'note: rank {e["rank"]} was logged by {len(e["pids"])} processes (pids '
                  f'{", ".join(map(str, e["pids"]))}): a restart, or children; summed')


def print_footer(logs):
    print()
    ended = sum(1 for k in logs.starts if k in logs.ends)
    print(f'{len(logs.starts)} process(es), {ended} with an end event; '
          f'{logs.lines} lines read; {len(logs.sites)} site(s)')
    if len(logs.starts) > ended:
        print(f'note: {len(logs.starts) - ended} process(es) have no end event '
              '(killed, or still running)')
    print_ranks(logs)
    if logs.malformed:
        print(f'{logs.malformed} malformed line(s) skipped; first at {logs.first_malformed}')
    if logs.unmatched:
        print('RECAP_SITES entries that selected no site: ' +
              ', '.join(repr(e) for e in sorted(logs.unmatched)))
    if logs.warnings or logs.errors:
        print(f'{logs.warnings} warning(s), {logs.errors} error(s):')
        for (kind, message), n in logs.messages.most_common(5):
            print(f'  {n} x {kind}: {message}')
    print('SAVED_MS: reuses x mean "new" instantiation time (the site\'s, else all sites\') '
          'minus the reuses\' own time; "-" when no instantiation time is known.')
