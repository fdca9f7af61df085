"""recap_logs - read recap's logs (JSON Lines) into what they say per
capture site, process and rank: read_logs(paths) -> Logs.

Python 3 standard library only; the recap command's report, config and
HTML page read logs through it (recap_report.read_logs is this one).

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
               "fallback" | "observe"), by ("recap" | "driver", recaptures
               only: who recorded it), reason (str or null), nodes, changed,
               eligible, ineligible, errors (ints), us (float, microseconds),
               result (str, only when the capture failed); optional:
               candidates (int: how many kept graphs the capture was matched
               against at its start), switch_call (str: the driver function of
               the capture at which it switched to a driver capture)
  instantiate  site, seq, how ("new" | "update" | "delta" | "reuse"),
               reason (str or null; a "new" whose reason contains "fail" is an
               executable update that failed and fell back to instantiation),
               us (float)
  reuse        site, state ("stopped" | "resumed" | "typed"), reason, seq
               (stopped and resumed: the captures the site had begun then),
               backoff (captures until it tries again), hits, misses; "typed": an
               update between two graphs of one node count failed, so the
               site's shapes count node types and edges from then on
  warning      site (or null), message
  error        site (or null), message
  timeline     (at exit, one per site that captured, before end) site, window
               (captures per window), windows (how many hold captures), and
               per window: counts by_recap, by_driver, fallback, fresh,
               observe, new, update, delta, reuse (each only where not all
               zero), capture_us, inst_us (whole microseconds)
  end          sites (array of objects: site, captures, recaptured, fallbacks,
               fresh, observed, nodes, changed, eligible, ineligible, errors,
               capture_us, instantiations, reused, new, update, delta, reuse,
               update_failures, hits, misses, backoffs, inst_new_us, reuse_us,
               kept, evicted, shapes_seen (how many kinds of graph - journal
               signatures: topology and kernels; else shapes - its captures
               had over the run, of up to 256 told apart), shapes_more (bool:
               more kinds than that), shapes_counted (captures whose kind recap
               knew; observed captures are not); optional: fallback_reasons
               (object: reason text -> exact count of the site's fallbacks),
               fresh_reasons (likewise of its captures left to the driver),
               step (where a site had two capture begins: where its step
               time went - periods (from one capture begin at the site to
               the next), period_us, and per class of STEP_CLASSES the calls
               and their time that fell in those periods: capture,
               capture_us (begin to end), instantiate, instantiate_us,
               launch, launch_us (executable graphs made from its graphs),
               and the driver calls the program made between captures, timed
               by recap: alloc, free (device memory), host_alloc, host_free
               (pinned host memory), sync, each with its _us, a class
               only where it had calls (absent: 0); what followed the
               site's last begin is not in it)),
               totals (object with the same counters summed, and
               budget_bytes, kept_bytes_peak, host_memory (where the
               program pinned host memory: tracked, kept, reused,
               reused_bytes, kept_bytes_peak, not_kept, not_kept_reason),
               step summed), unmatched
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
# An end event's "step" classes, and those of them that are driver calls the
# program made between captures.
STEP_CLASSES = ('capture', 'instantiate', 'launch', 'alloc', 'free', 'host_alloc',
                'host_free', 'sync')
BETWEEN_CLASSES = ('alloc', 'free', 'host_alloc', 'host_free', 'sync')
INSTANTIATE_HOWS = ('new', 'update', 'delta', 'reuse')
ROUTINE_EVENTS_FULL = 64    # when a start event does not say


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
        # False where fallback_reasons counts only the logged (sampled)
        # capture events, not every fallback
        self.fallback_reasons_exact = True
        self.fallbacks_logged = 0
        self.switch_calls = {}      # fallback reason -> Counter of switch_call
        self.candidates = collections.Counter()   # logged "candidates" -> captures
        self.node_counts = collections.Counter()  # logged captures' node counts
        self.changed_max = 0                      # most changed nodes of a logged recapture
        self.stop_reasons = collections.Counter() # why its reuse gate stopped (reuse events)
        self.max_seq = 0
        self.fresh_reasons = collections.Counter()
        # True where an end event counted every fresh capture by reason
        # (fresh_reasons); else the logged (sampled) capture events' reasons
        self.fresh_reasons_exact = False
        self.merged = 0             # processes merged into this (a site summed over them)
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
        self.messages = collections.Counter()     # (kind, message) of its warnings, errors
        # Per process only (never merged): its logged capture and
        # instantiate events in log order when read with keep_events,
        # its reuse events, its timeline event.
        self.events = []
        self.reuse = []
        self.timeline = None
        # what recap kept for the site (end events only)
        self.kept = 0
        self.evicted = 0
        self.hits = 0
        self.backoffs = 0
        # device memory its captures allocated that recap handed back
        # (end events only): blocks and bytes
        self.memory_reused = 0
        self.memory_reused_bytes = 0
        # End events only: how many kinds of graph the site's captures had
        # (None: no end event says), whether more than the writer tells
        # apart, and of how many captures; where its step time went
        # (step_of: None where no end event has a period).
        self.shapes_seen = None
        self.shapes_more = False
        self.shapes_counted = 0
        self.step = None

    @property
    def reused(self):
        return self.inst['update'] + self.inst['delta'] + self.inst['reuse']


class Logs:
    def __init__(self, keep_events=False):
        self.keep_events = keep_events
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
        # pinned host memory recap handed back, summed over end events
        self.host_memory = collections.Counter()
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


# One logged capture, instantiation, reuse-gate change (Site.events, .reuse).
# An instantiation's `after` and a reuse change's `after` are the highest
# capture seq the process had logged for the site when it was written.
Capture = collections.namedtuple('Capture', 'seq path by us nodes changed eligible ineligible '
                                 'reason candidates switch_call result')
Instantiation = collections.namedtuple('Instantiation', 'seq how us reason after')
Reuse = collections.namedtuple('Reuse', 'state reason seq backoff after')

TIMELINE_COUNTS = ('by_recap', 'by_driver', 'fallback', 'fresh', 'observe',
                   'new', 'update', 'delta', 'reuse')


def _timeline(ev):
    """A timeline event's counts per window: {'window', 'windows', and per
    key of TIMELINE_COUNTS, capture_us, inst_us a list of one number per
    window (zeros where the event left the key out)}."""
    window, windows = ev.get('window'), ev.get('windows')
    if not _count(window) or not window or not _count(windows) or windows > 4096:
        raise ValueError('"window" or "windows" is not a positive count')
    out = {'window': window, 'windows': windows}
    for key in TIMELINE_COUNTS + ('capture_us', 'inst_us'):
        v = ev.get(key)
        if v is None:
            v = [0] * windows
        if not isinstance(v, list) or len(v) != windows or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in v):
            raise ValueError(f'"{key}" is not {windows} counts')
        out[key] = v
    return out


def _call(v):
    """A capture's switch_call: the driver function's name (as the writer
    logs it), or a call number; None when absent or neither."""
    if isinstance(v, str) and v:
        return v
    return v if _count(v) else None


def call_text(call):
    """How a switch_call reads: the function's name, or 'call N'."""
    return f'call {call}' if isinstance(call, int) else call


def _count(v):
    """Whether v is a count (a non-negative int, not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


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
        # A process of many sites writes its end in parts (each with
        # "part", the last with the totals): their sites add up.
        logs.ends.add((source, ev.get('pid')))
        logs.end_counts.setdefault((source, ev.get('pid')), {}).update(counts)
        for entry in ev.get('unmatched') or []:
            if isinstance(entry, str):
                logs.unmatched[entry] += 1
        totals = ev.get('totals')
        host = totals.get('host_memory') if isinstance(totals, dict) else None
        if isinstance(host, dict):
            for key in ('tracked', 'kept', 'reused', 'reused_bytes'):
                if _count(host.get(key)):
                    logs.host_memory[key] += host[key]
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
        seq = ev.get('seq')
        candidates = ev.get('candidates')
        switch_call = _call(ev.get('switch_call'))
        site = logs.proc_site(source, ev.get('pid'), site_id)
        site.captures += 1
        site.paths[path] += 1
        if _count(seq):
            site.max_seq = max(site.max_seq, seq)
        if _count(candidates):
            site.candidates[candidates] += 1
        if values['nodes'] > 0:
            site.node_counts[values['nodes']] += 1
        if path == 'recapture':
            site.changed_max = max(site.changed_max, values['changed'])
        if path == 'recapture' and ev.get('by') == 'recap':
            site.paths['by_recap'] += 1
        site.nodes += values['nodes']
        site.changed += values['changed']
        site.eligible += values['eligible']
        site.ineligible += values['ineligible']
        site.errors += values['errors']
        site.capture_us += us
        if logs.keep_events:
            site.events.append(Capture(
                seq if _count(seq) else 0, path, ev.get('by') if path == 'recapture' else None,
                us, values['nodes'], values['changed'], values['eligible'],
                values['ineligible'], reason, candidates if _count(candidates) else None,
                switch_call, _text(ev, 'result')))
        if path == 'fallback':
            site.fallback_reasons[reason or 'no reason given'] += 1
            site.fallbacks_logged += 1
            if switch_call is not None:
                calls = site.switch_calls.setdefault(reason or 'no reason given',
                                                     collections.Counter())
                calls[switch_call] += 1
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
        if logs.keep_events:
            seq = ev.get('seq')
            site.events.append(Instantiation(seq if _count(seq) else 0, how, us, reason,
                                             site.max_seq))
        if how == 'new':
            site.inst_new_us += us
            if reason and 'fail' in reason.lower():
                site.failed_updates += 1
                site.update_fail_reasons[reason] += 1
        else:
            site.reuse_us += us
    elif kind == 'reuse':
        site = logs.proc_site(source, ev.get('pid'), _site_id(ev))
        state = _text(ev, 'state')
        seq, backoff = ev.get('seq'), ev.get('backoff')
        if state == 'stopped':
            site.stop_reasons[_text(ev, 'reason') or 'no reason given'] += 1
        site.reuse.append(Reuse(state or '', _text(ev, 'reason'),
                                seq if _count(seq) and seq else None,
                                backoff if _count(backoff) else 0, site.max_seq))
    elif kind == 'timeline':
        site = logs.proc_site(source, ev.get('pid'), _site_id(ev))
        site.timeline = _timeline(ev)
    elif kind in ('warning', 'error'):
        message = _text(ev, 'message') or ''
        s = ev.get('site')
        if s is not None:
            logs.site(_site_id(ev)).warnings += 1
            logs.site(_site_id(ev)).messages[(kind, message)] += 1
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
    event. Fallback reasons come from its fallback_reasons where it has
    them; else they stay as the events gave them, exact only if every
    fallback was logged. Fresh captures' reasons likewise come from its
    fresh_reasons where it has them. Other reasons and warnings stay as
    logged."""
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
    for key in ('kept', 'evicted', 'hits', 'backoffs', 'memory_reused', 'memory_reused_bytes'):
        setattr(site, key, int(n(key)))
    seen = counts.get('shapes_seen')
    if _count(seen):
        site.shapes_seen = seen
        site.shapes_more = counts.get('shapes_more') is True
        site.shapes_counted = int(n('shapes_counted'))
    site.step = step_of(counts.get('step'))
    reasons = counts.get('fallback_reasons')
    if isinstance(reasons, dict) and all(isinstance(k, str) and _count(v)
                                         for k, v in reasons.items()):
        site.fallback_reasons = collections.Counter({k: v for k, v in reasons.items() if v})
        site.fallback_reasons_exact = True
    else:
        site.fallback_reasons_exact = site.fallbacks_logged == site.paths['fallback']
    reasons = counts.get('fresh_reasons')
    if isinstance(reasons, dict) and all(isinstance(k, str) and _count(v)
                                         for k, v in reasons.items()):
        site.fresh_reasons = collections.Counter({k: v for k, v in reasons.items() if v})
        site.fresh_reasons_exact = True


def step_of(obj):
    """An end event's "step" object as {'periods', 'period_us', and per class
    of STEP_CLASSES its calls and CLASS_us}, or None where it has no
    period (or is not such an object)."""
    if not isinstance(obj, dict) or not _count(obj.get('periods')) or not obj['periods']:
        return None

    def us(key):
        v = obj.get(key)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
        return float(v) if ok else 0.0
    out = {'periods': obj['periods'], 'period_us': us('period_us')}
    for c in STEP_CLASSES:
        v = obj.get(c, 0)
        out[c] = v if _count(v) else 0
        out[c + '_us'] = us(c + '_us')
    return out


def add_steps(a, b):
    """Two step figures summed (either may be None)."""
    if a is None or b is None:
        return dict(a or b) if (a or b) else None
    return {k: a[k] + b[k] for k in a}


def _merge_site(into, site):
    for key in ('captures', 'nodes', 'changed', 'eligible', 'ineligible', 'errors',
                'capture_us', 'inst_new_us', 'reuse_us', 'failed_updates', 'warnings',
                'kept', 'evicted', 'hits', 'backoffs', 'memory_reused', 'memory_reused_bytes'):
        setattr(into, key, getattr(into, key) + getattr(site, key))
    for key in ('paths', 'fallback_reasons', 'fresh_reasons', 'inst', 'update_fail_reasons',
                'candidates', 'node_counts', 'stop_reasons'):
        getattr(into, key).update(getattr(site, key))
    into.changed_max = max(into.changed_max, site.changed_max)
    into.step = add_steps(into.step, site.step)
    if site.shapes_seen is not None:
        # Kinds are told apart within a process only: over several, the
        # most any one saw.
        into.shapes_seen = max(into.shapes_seen or 0, site.shapes_seen)
        into.shapes_more = into.shapes_more or site.shapes_more
        into.shapes_counted += site.shapes_counted
    into.fallbacks_logged += site.fallbacks_logged
    into.fallback_reasons_exact = into.fallback_reasons_exact and site.fallback_reasons_exact
    # Exact only where every process's end event counted them.
    into.fresh_reasons_exact = site.fresh_reasons_exact and (
        into.merged == 0 or into.fresh_reasons_exact)
    into.merged += 1
    into.max_seq = max(into.max_seq, site.max_seq)
    for reason, calls in site.switch_calls.items():
        into.switch_calls.setdefault(reason, collections.Counter()).update(calls)


def _merge_processes(logs):
    """Per process: the end event's counters where it has one, else what its
    events say; then summed per site over processes (one per rank, say),
    and per site and rank (processes of one rank: a restart, fork children)."""
    procs = set(logs.proc_sites) | set(logs.end_counts)
    for proc in sorted(procs, key=repr):
        sites = logs.proc_sites.get(proc, {})
        ended = logs.end_counts.get(proc, {})
        for site_id, counts in ended.items():
            if site_id not in sites:
                sites[site_id] = Site(site_id)
                logs.site(site_id)
            _apply_end_counts(sites[site_id], counts)
        # Counted from events alone: past its first routine_events_full
        # captures a site's routine events were thinned.
        full = logs.starts.get(proc, {}).get('routine_events_full')
        full = full if _count(full) else ROUTINE_EVENTS_FULL
        for site_id, site in sites.items():
            if site_id not in ended and site.max_seq > full:
                site.fallback_reasons_exact = False
        rank = logs.rank_of(proc)
        for site_id, site in sites.items():
            _merge_site(logs.site(site_id), site)
            per_rank = logs.rank_sites.setdefault(site_id, {})
            if rank not in per_rank:
                per_rank[rank] = Site(site_id)
            _merge_site(per_rank[rank], site)


def read_logs(paths, keep_events=False):
    """Logs read from paths ('-': standard input). keep_events keeps each
    process's capture and instantiate events per site (Site.events), for
    pictures of the run; counting alone does without."""
    logs = Logs(keep_events)
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
