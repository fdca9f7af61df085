"""recap_advice - what the program could change at a capture site, read from
the log's own figures: `recap report` prints it below the table, --json
gives it per site, the HTML page per lane.

Each rule is one function of (site, about): site holds the counters (a
site over all processes, or one process's; recap_logs.Site), about the
site's frames and label. It returns an Advice whose text names the
figures it rests on, or None. A rule claims nothing the log does not show:
where the log lacks what a claim needs, the claim is not made. RULES runs
them in order; a site gets at most MAX_ADVICE pieces, and none where
nothing would help.

Python 3 standard library only; imported by recap_report.
"""

import collections
import re

from recap_logs import call_text

# A rule about repeat captures needs this many of them.
MIN_REPEATS = 8
# "A handful of nodes": at most this many changed per repeat capture on
# average, and at most this fraction of the graph's nodes.
FEW_NODES = 8
FEW_FRACTION = 0.25
# Falling back often: at least this many fallbacks and this share of the
# captures recap tried to repeat.
OFTEN_COUNT = 3
OFTEN_SHARE = 0.1
MAX_ADVICE = 3

Advice = collections.namedtuple('Advice', 'rule text figures')


# ---- what the log says, in the rules' words ---------------------------------------

def us_text(us):
    return f'{us:,.1f} µs' if us < 10000 else f'{us / 1000:,.2f} ms'


def framework(about):
    """'pytorch', 'cupy', 'python' (another Python binding) or 'cuda',
    from the site's Python and C frames and label."""
    texts = list(about.python_frames) + list(about.frames) + [about.label or '']
    lowered = ' '.join(texts).lower()
    if re.search(r'(^|[/\\ ])torch[/\\_]|libtorch|site-packages/torch|_inductor|torchinductor',
                 lowered):
        return 'pytorch'
    if 'cupy' in lowered:
        return 'cupy'
    if about.python_frames:
        return 'python'
    return 'cuda'


def replay_call(about):
    """How the site's program would capture once and replay."""
    return {
        'pytorch': 'with PyTorch, capture once into a torch.cuda.CUDAGraph (with '
                   'torch.cuda.graph(g): ...) and call g.replay() each iteration',
        'cupy': 'with CuPy, capture once (stream.begin_capture() ... stream.end_capture()) '
                'and call graph.launch() each iteration',
        'python': 'instantiate the graph once and launch it each iteration '
                  '(cudaGraphInstantiate once, then cudaGraphLaunch), keeping the '
                  'executable graph',
        'cuda': 'instantiate the graph once and launch it each iteration '
                '(cudaGraphInstantiate once, then cudaGraphLaunch), keeping the '
                'executable graph',
    }[framework(about)]


def per_capture(site):
    """What a capture here cost on average (µs): capturing, instantiating
    (new and reused together), from the exact counters."""
    capture = site.capture_us / site.captures if site.captures else 0.0
    insts = sum(site.inst.values())
    inst = (site.inst_new_us + site.reuse_us) / insts if insts else 0.0
    return capture, inst


def saving(site):
    """(text, figures): what replaying instead of capturing would save per
    iteration, the mean capture and instantiation time a capture here
    took (the exact counters)."""
    capture, inst = per_capture(site)
    text = (f'{us_text(capture + inst)} per iteration (capture {us_text(capture)}, '
            f'instantiation {us_text(inst)} on average)' if sum(site.inst.values()) else
            f'{us_text(capture)} per iteration (the mean capture; its graphs were never '
            f'instantiated)')
    return text, {'capture_us': capture, 'instantiation_us': inst,
                  'saved_us_per_iteration': capture + inst}


def shapes(site):
    """(k, how): how many shapes recur at the site, from its logged
    captures' node counts (those seen twice or more); k is 0 or 1 where
    they show no more than one. Graphs of one node count may be of several
    shapes too, but the log does not tell them apart; and the kept graphs
    a capture was matched against ("candidates") are not shapes (a program
    holding one graph while it captures the next keeps two of one shape),
    so they are not counted here."""
    recurring = sorted(n for n, c in site.node_counts.items() if c >= 2)
    if len(recurring) < 2:
        return len(recurring), ''
    shown = ', '.join(map(str, recurring[:6])) + (', ...' if len(recurring) > 6 else '')
    return len(recurring), (f'{len(recurring)} node counts recur among its logged captures '
                            f'({shown})')


def one_shape(site):
    """Whether the log says every capture recap knew the graph of had one
    shape - its end event's shapes_seen: one journal signature (topology
    and kernels) or one shape over at least MIN_REPEATS captures. None
    where the log does not say (no end event, or a log from before
    shapes_seen)."""
    if site.shapes_seen is None:
        return None
    return site.shapes_seen == 1 and not site.shapes_more and \
        site.shapes_counted >= MIN_REPEATS


def step_time(site):
    """(text, figures) from the end event's step accounting (None where the
    log has none): the mean period, what capturing and instantiating took
    of it, and one launch, against which replaying the graph would leave
    the launch alone."""
    step = site.step
    if not step or not step.get('periods'):
        return None
    n = step['periods']
    period, capture = step['period_us'] / n, step['capture_us'] / n
    inst = step['instantiate_us'] / n
    launch = step['launch_us'] / step['launch'] if step['launch'] else None
    text = (f'Measured over {n:,} periods (capture begin to capture begin): a period took '
            f'{us_text(period)}, of which capturing {us_text(capture)} and instantiating '
            f'{us_text(inst)}; ' + (f'one launch of its graph took {us_text(launch)}.'
                                    if launch is not None else
                                    'recap saw no launch of its graphs.'))
    return text, {'periods': n, 'period_us': period, 'capture_us_per_period': capture,
                  'instantiate_us_per_period': inst, 'launch_us': launch}


def repeats(site):
    """Captures after the first that recap tried to repeat or repeated."""
    return site.paths['recapture'] + site.paths['fallback']


def reasons_matching(counter, pattern):
    return {r: n for r, n in counter.items() if re.search(pattern, r)}


# ---- the rules --------------------------------------------------------------------

def capture_once(site, about):
    """Every repeat capture changed no node. Reads: recaptured, fallbacks,
    changed / ineligible / errors (the end event's sums over all captures:
    0 changed in total means 0 in each), one shape (shapes()), and the
    mean capture and instantiation time. Why: a graph that comes back the
    same each time needs capturing once; recap can only make the repeat
    captures cheaper, replaying the graph skips them."""
    n = site.paths['recapture']
    if n < MIN_REPEATS or site.paths['fallback'] or site.changed or site.ineligible \
            or site.errors or shapes(site)[0] >= 2:
        return None
    saved, figures = saving(site)
    measured = step_time(site)
    return Advice('capture_once', (
        f'All {n:,} repeat captures changed no node (0 changed nodes over them in the log): '
        f'the graph is the same each time. Capture it once and replay it: '
        f'{replay_call(about)}. That would save about {saved}.' +
        (f' {measured[0]}' if measured else '')),
        dict(figures, repeat_captures=n, changed=0, **(measured[1] if measured else {})))


def static_inputs(site, about):
    """The same graph every time with new parameters. Where the end event
    says every capture had one shape (one_shape: the same topology and
    kernels), however many nodes changed - a few scalars, or every
    pointer as a framework's fresh allocations make them; reads
    shapes_seen, shapes_counted, recaptured, changed, nodes, changed_max
    and the step accounting (step_time): the period, capturing and
    instantiating against one launch. Where the log does not say
    (older logs), only where the repeat captures changed a handful of
    nodes each and fell back rarely, with one node count. Never where
    several shapes were seen (graph_per_shape's), nor where no node
    changed (capture_once's). Why: the same graph with new parameters
    (pointers, scalars) can be captured once and fed through buffers it
    keeps reading."""
    if capture_once(site, about) is not None:
        return None
    same = one_shape(site)
    if same:
        return _one_shape_advice(site, about)
    if same is False and site.shapes_seen is not None and site.shapes_seen >= 2:
        return None
    n = site.paths['recapture']
    if n < MIN_REPEATS or not site.changed or shapes(site)[0] >= 2:
        return None
    if site.paths['fallback'] > OFTEN_SHARE * repeats(site):
        return None
    mean = site.changed / n
    nodes = site.nodes / site.captures if site.captures else 0.0
    if mean > FEW_NODES or not nodes or mean > FEW_FRACTION * nodes:
        return None
    saved, figures = saving(site)
    how = ('copy the new inputs into static tensors the graph reads, then g.replay() '
           '(torch.cuda.graph captured once)' if framework(about) == 'pytorch' else
           'copy the new inputs into the buffers the graph reads (or set those nodes\' '
           'parameters with cudaGraphExecKernelNodeSetParams), then launch it')
    most = f', at most {site.changed_max} in one logged capture' if site.changed_max else ''
    return Advice('static_inputs', (
        f'The {n:,} repeat captures changed {mean:.1f} of {nodes:.0f} nodes each on average'
        f'{most}: the same graph with a few new parameters. Capture it once and each '
        f'iteration {how}. That would save up to {saved}, less the copies.'),
        dict(figures, repeat_captures=n, changed_per_capture=mean, nodes=nodes,
             changed_max_logged=site.changed_max))


def _one_shape_advice(site, about):
    counted = site.shapes_counted
    n = site.paths['recapture']
    nodes = site.nodes / site.captures if site.captures else 0.0
    changed = ''
    figures = {'shapes_seen': 1, 'captures_with_shape': counted, 'nodes': nodes}
    if n and site.changed:
        mean = site.changed / n
        most = f', at most {site.changed_max} in one logged capture' if site.changed_max else ''
        changed = (f'; its {n:,} repeat captures changed {mean:.1f} of {nodes:.0f} nodes each '
                   f'on average{most} - new parameters (pointers, scalars), the same graph')
        figures.update(repeat_captures=n, changed_per_capture=mean,
                       changed_max_logged=site.changed_max)
    how = ('keep the tensors it reads and writes at fixed addresses (static tensors, '
           'torch.cuda.graph captured once), copy each iteration\'s new inputs into them and '
           'call g.replay()' if framework(about) == 'pytorch' else
           'keep the buffers it reads and writes at fixed addresses, copy each iteration\'s new '
           'inputs into them (or set the changed nodes\' parameters with '
           'cudaGraphExecKernelNodeSetParams) and launch it')
    saved, saving_figures = saving(site)
    figures.update(saving_figures)
    measured = step_time(site)
    if measured:
        text, step_figures = measured
        figures.update(step_figures)
        rest = step_figures['capture_us_per_period'] + step_figures['instantiate_us_per_period']
        after = (f' Replaying would replace the {us_text(rest)} that capturing and '
                 f'instantiating take each period with one launch, plus the copies.')
        tail = f' {text}{after}'
    else:
        tail = f' That would save up to {saved}, less the copies.'
    return Advice('static_inputs', (
        f'Every one of the {counted:,} captures whose graph recap knew here had one shape (one '
        f'signature: the same topology and kernels each time){changed}. Capture it once (once '
        f'per shape, should another appear) and replay it: {how}.{tail}'), figures)


def graph_per_shape(site, about):
    """k shapes cycle through one site. Reads: shapes() (node counts that
    recur among logged captures), captures, the mean capture and
    instantiation time. Why: a
    graph kept per shape and replayed skips the capture; recap keeps one
    per shape but still pays each capture."""
    k, how = shapes(site)
    if k < 2 or site.captures < 2 * k or site.captures < MIN_REPEATS:
        return None
    saved, figures = saving(site)
    keep = ('torch.compile(mode="reduce-overhead") does this, or a dict from shape to '
            'torch.cuda.CUDAGraph' if framework(about) == 'pytorch' else
            'a map from shape to executable graph does this: capture and instantiate a '
            'shape the first time, launch it after')
    return Advice('graph_per_shape', (
        f'{k} shapes cycle through this site ({how}) over {site.captures:,} captures: keep '
        f'one graph per shape and replay it ({keep}). Once each shape is captured, that '
        f'would save about {saved}.'),
        dict(figures, shapes=k, captures=site.captures))


def _not_recorded(site, pattern):
    """(reasons, logged, fresh): fresh-capture reasons matching pattern,
    how many captures gave them (every one where the end event counted
    them, else the logged ones), the exact fresh count."""
    found = reasons_matching(site.fresh_reasons, pattern)
    return found, sum(found.values()), site.paths['fresh']


def _say_so(site, n):
    """'N captures say so', 'logged' where only the logged ones are counted."""
    return f'{n} {"" if site.fresh_reasons_exact else "logged "}captures say so'


def memory_nodes(site, about):
    """Not recorded because its graphs hold memory allocation (or free)
    nodes. Reads: the fresh captures' reasons (logged) and the exact fresh
    count, the mean capture and "new" instantiation time. Why: recap
    cannot replay allocation nodes (the program holds their addresses);
    memory allocated outside the capture lets recap record the graph."""
    found, logged, fresh = _not_recorded(site, r'memory (allocation|free)')
    if not found:
        return None
    capture, _ = per_capture(site)
    new = site.inst_new_us / site.inst['new'] if site.inst['new'] else 0.0
    reason = max(found, key=found.get)
    return Advice('memory_nodes', (
        f'recap does not record this site\'s captures: "{reason}" ({_say_so(site, logged)}; '
        f'{fresh:,} of its {site.captures:,} captures were plain). Allocate outside '
        f'the capture (or with the graph\'s memory pool) so the graph holds no memory '
        f'allocation nodes, and recap can record it and update its executable graph: each '
        f'capture here took {us_text(capture)} and each new instantiation {us_text(new)}.'),
        {'fresh': fresh, 'captures': site.captures, 'logged_with_reason': logged,
         'capture_us': capture, 'new_instantiation_us': new})


def conditional_nodes(site, about):
    """Not recorded because its graphs hold conditional nodes. Reads: the
    fresh captures' reasons (logged), the exact fresh count and capture
    time. Why: a graph with conditional nodes decides on the device, so it
    is made to be captured once and replayed."""
    found, logged, fresh = _not_recorded(site, r'conditional')
    if not found or site.captures < 2:
        return None
    saved, figures = saving(site)
    return Advice('conditional_nodes', (
        f'This site\'s graphs hold conditional nodes ({_say_so(site, logged)}), which '
        f'recap does not record, and the program captured them {site.captures:,} times. A '
        f'graph with conditional nodes decides on the device (cudaGraphSetConditional from a '
        f'kernel): capture it once and launch it each iteration, saving about {saved}.'),
        dict(figures, fresh=fresh, captures=site.captures, logged_with_reason=logged))


def switched_at(calls):
    """Where logged fallbacks switched to a driver capture (calls: Counter
    of switch_call), '' where the log does not say."""
    if not calls:
        return ''
    if len(calls) == 1:
        return f'switched to a driver capture at {call_text(next(iter(calls)))}'
    return 'switched to a driver capture at ' + ', '.join(
        f'{call_text(c)} ({n}x)' for c, n in calls.most_common(3)) + (
        ', ...' if len(calls) > 3 else '')


def _top_fallback(site):
    """The most frequent fallback reason, its count, and where its logged
    captures switched to a driver capture."""
    if not site.fallback_reasons:
        return None, 0, ''
    reason, n = site.fallback_reasons.most_common(1)[0]
    where = switched_at(site.switch_calls.get(reason))
    return reason, n, f', {where}' if where else ''


def backed_off(site, about):
    """Stopped by the back-off. Reads: backoffs (exact), the reuse
    events' stop reasons, the fresh count, the logged captures' node
    counts (shapes that rarely repeat), and the most frequent fallback
    reason with its switch call or the update failures. Why: while a site is stopped, every
    capture is plain and pays a new instantiation; what stopped it is what
    to change."""
    if not site.backoffs:
        return None
    why = site.stop_reasons.most_common(1)[0][0] if site.stop_reasons else 'no reason logged'
    text = (f'recap stopped keeping graphs here {site.backoffs} time(s) (the back-off), most '
            f'often because {why}; {site.paths["fresh"]:,} of {site.captures:,} captures were '
            f'plain.')
    figures = {'backoffs': site.backoffs, 'stop_reason': why, 'fresh': site.paths['fresh'],
               'captures': site.captures}
    reason, n, where = _top_fallback(site)
    looks = re.search(r'(\d+) misses against \d+ hits(?: and (\d+) failures)?', why)
    logged, distinct = sum(site.node_counts.values()), len(site.node_counts)
    rare = logged >= MIN_REPEATS and 2 * distinct >= logged
    if rare or (looks and int(looks.group(1)) >= int(looks.group(2) or 0)):
        seen = (f' Its {logged:,} logged captures have {distinct:,} node counts: shapes rarely '
                f'repeat.' if rare else ' Its captures rarely matched a graph recap kept.')
        text += (f'{seen} Where their sizes vary, pad or bucket them so that shapes repeat; '
                 f'where they never repeat, there is nothing to keep.')
        figures.update(logged_captures=logged, node_counts=distinct)
    elif reason and n >= site.failed_updates:
        text += (f' The most frequent fallback: "{reason}" ({n:,}x{where}); a capture that '
                 f'makes that call the same way each time lets recap repeat it.')
        figures.update(fallback_reason=reason, fallback_count=n)
    elif site.update_fail_reasons:
        failed, count = site.update_fail_reasons.most_common(1)[0]
        text += (f' Executable updates failed {site.failed_updates:,} time(s), most often: '
                 f'"{failed}" ({count:,}x logged).')
        figures.update(update_failure=failed, update_failures=site.failed_updates)
    return Advice('backed_off', text, figures)


def falls_back(site, about):
    """Falling back often (and not stopped: backed_off says it then).
    Reads: fallbacks and recaptured (exact), the fallback reasons (exact or
    sampled) and their switch calls. Why: each fallback replays the
    capture into a plain one; the call that differed is the program's to
    make the same."""
    tried = repeats(site)
    falls = site.paths['fallback']
    if site.backoffs or falls < OFTEN_COUNT or falls < OFTEN_SHARE * tried:
        return None
    reason, n, where = _top_fallback(site)
    sampled = '' if site.fallback_reasons_exact else ' of those logged'
    return Advice('falls_back', (
        f'{falls:,} of the {tried:,} captures recap tried to repeat fell back '
        f'({100.0 * falls / tried:.0f}%), most often: "{reason}" ({n:,}x{sampled}{where}). '
        f'A capture that makes that call the same way each time (the same kernel, launch '
        f'configuration and streams) lets recap repeat it; else `recap config` can set this '
        f'site to mode = update.'),
        {'fallbacks': falls, 'repeat_attempts': tried, 'reason': reason, 'reason_count': n,
         'sampled': not site.fallback_reasons_exact})


RULES = (graph_per_shape, capture_once, static_inputs, memory_nodes, conditional_nodes,
         backed_off, falls_back)


def advise(site, about=None):
    """At most MAX_ADVICE pieces of advice for site (counters), about its
    frames and label (about: the site over all processes; default site)."""
    about = about or site
    out = []
    for rule in RULES:
        advice = rule(site, about)
        if advice is not None:
            out.append(advice)
    return out[:MAX_ADVICE]
