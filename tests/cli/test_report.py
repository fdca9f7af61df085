#!/usr/bin/env python3
"""test_report.py - `recap report` fits the screen and says why sites fell
back: the table within the terminal's width (COLUMNS, else 100 columns),
labels shortened so file and line stay readable, columns grouped and
stacked in blocks; --wide, --csv; each site's fallbacks by reason, exact
from the end event's fallback_reasons or marked sampled.

Environment (set by meson): RECAP_SCRIPT (the configured recap, beside its
modules), RECAP_LIB, SCENARIO_BIN and the stand-in's variables."""

import csv
import io
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.environ['RECAP_SCRIPT']))
from test_recap import Base, capture, ev, inst, recap  # noqa: E402
from preload import preload_value  # noqa: E402  (test_recap put tests/support on the path)
import recap_report  # noqa: E402

A = '00000000000000aa'
B = '00000000000000bb'
C = '00000000000000cc'

# Labels as torch.compile's sites get them: inductor's generated file, its
# caller in torch; an NVTX range over a deep project path; a short one.
INDUCTOR = ('/tmp/torchinductor_root/xq/cxqzv4h2ldmu5o7gx5ilkwjlu4fvo5xq6hwy3g7mtkgl5fkbfiz5.py'
            ':1022 (call) < /usr/local/lib/python3.11/site-packages/torch/_inductor/'
            'cudagraph_trees.py:2087 (run)')
DECODE = ('decode @ /home/user/project/llm/model/decoder_layers/attention.py:412 (forward) '
          '< /home/user/project/llm/generate.py:88 (step)')
SHORT = 'train.py:33 (main)'


def start(pid=100, **kw):
    fields = dict(version='0.1.0', exe='/usr/bin/python3', driver=13000, recapture_api=False,
                  mode='auto', sites='all', config=None, log='x', rank=None, rank_var=None,
                  world_size=None, stack_depth=8, routine_events_full=64)
    fields.update(kw)
    return ev('start', pid=pid, **fields)


def site(site_id, label, pid=100):
    return ev('site', pid=pid, site=site_id, frames=['python3+0x10'], label=label, mode='auto')


def end_entry(site_id, captures, fallbacks, **extra):
    entry = {'site': site_id, 'captures': captures, 'recaptured': captures - fallbacks - 1,
             'by_recap': captures - fallbacks - 1, 'fallbacks': fallbacks, 'fresh': 1,
             'observed': 0, 'nodes': 10 * captures, 'changed': 0, 'eligible': 3,
             'ineligible': 0, 'errors': 0, 'capture_us': 5.0 * captures,
             'instantiations': captures, 'reused': captures - 1, 'new': 1,
             'update': captures - 1, 'delta': 0, 'reuse': 0, 'update_failures': 0,
             'hits': captures - 1, 'misses': 1, 'backoffs': 0, 'inst_new_us': 100.0,
             'reuse_us': 2.0 * (captures - 1), 'kept': 1, 'evicted': 0}
    entry.update(extra)
    return entry


def labelled_run(t):
    """Three sites with long and short labels, counted by their events."""
    lines = [start()]
    for n, (sid, label) in enumerate(((A, INDUCTOR), (B, DECODE), (C, SHORT))):
        lines.append(site(sid, label))
        for seq in range(1, 12 + n):
            path = 'fresh' if seq == 1 else 'fallback' if seq % 4 == 0 else 'recapture'
            lines.append(capture(sid, path, seq, reason='kernel differs' if path == 'fallback'
                                 else 'first capture' if path == 'fresh' else None,
                                 eligible=2))
            lines.append(inst(sid, 'new' if seq == 1 else 'update', 90.0 if seq == 1 else 3.0,
                              seq=seq))
    return t.write('labels.jsonl', lines)


def table_blocks(text):
    """The stacked tables of a report: [(group line, header, rows)] with each
    row split at runs of two spaces or more (labels hold single spaces)."""
    blocks, lines = [], text.splitlines()
    i = 0
    while i + 1 < len(lines) and lines[i + 1].startswith('SITE'):
        header = re.split(r'\s{2,}', lines[i + 1].strip())
        rows, j = [], i + 2
        while j < len(lines) and lines[j].strip():
            if not set(lines[j]) <= {'-', ' '}:
                rows.append(re.split(r'\s{2,}', lines[j].strip()))
            j += 1
        blocks.append((lines[i], header, rows))
        i = j + 1
    return blocks


class Shorten(unittest.TestCase):
    def test_file_and_line_stay(self):
        for width in (90, 60, 45, 36):
            short = recap_report.shorten_label(INDUCTOR, width)
            self.assertLessEqual(len(short), width, short)
            self.assertIn('.py:1022 (call)', short, width)
            self.assertIn('...', short)
            short = recap_report.shorten_label(DECODE, width)
            self.assertLessEqual(len(short), width, short)
            self.assertTrue(short.startswith('decode @ '), short)
            self.assertIn('.py:412 (forward)', short, width)

    def test_caller_kept_while_it_fits_folders_go_first(self):
        short = recap_report.shorten_label(DECODE, 80)
        self.assertEqual(short, 'decode @ ...ecoder_layers/attention.py:412 (forward) < '
                                '.../generate.py:88 (step)')
        self.assertEqual(recap_report.shorten_label(SHORT, 18), SHORT)
        self.assertEqual(recap_report.shorten_label(SHORT, 12), 'train...ain)')
        for width in range(4, 60):
            self.assertLessEqual(len(recap_report.shorten_label(INDUCTOR, width)), width)


class Fit(Base):
    def test_fits_100_columns_when_not_a_terminal(self):
        log = labelled_run(self)
        wide = recap('report', '--wide', log)
        self.assertEqual(wide.returncode, 0, wide.stderr)
        self.assertGreater(max(map(len, wide.stdout.splitlines())), 180)
        self.assertIn(INDUCTOR, wide.stdout, '--wide keeps whole labels')
        self.assertEqual(len(table_blocks(wide.stdout)), 1)
        data = json.loads(recap('report', '--json', log).stdout)
        want = {row['site']: row for row in data['sites']}
        for columns in (None, '80', '100', '120', '200'):
            r = recap('report', log, env={'COLUMNS': columns} if columns else None)
            self.assertEqual(r.returncode, 0, r.stderr)
            width = int(columns or 100)
            for line in r.stdout.splitlines():
                self.assertLessEqual(len(line), width, f'COLUMNS={columns}: {line!r}')
            blocks = table_blocks(r.stdout)
            self.assertTrue(blocks)
            seen = set()
            for groups, header, rows in blocks:
                self.assertEqual(header[:2], ['SITE', 'LABEL'])
                self.assertTrue(groups.strip(), 'a group title line above each block')
                self.assertEqual([row[0] for row in rows], [C, B, A, 'total'], 'most captures first')
                for row in rows[:-1]:
                    label = row[1]
                    self.assertIn({A: '.py:1022 (call)', B: '.py:412 (forward)',
                                   C: SHORT}[row[0]], label)
                    for name, value in zip(header[2:], row[2:]):
                        key = dict(recap_report.COLUMNS)[name]
                        expect = want[row[0]][key]
                        if key == 'saved_us':
                            expect = f'{expect / 1000:.3f}'
                        self.assertEqual(value, str(expect), (row[0], name))
                        seen.add(name)
            names = {h for h, _ in recap_report.COLUMNS[2:]}
            hidden = set()
            flat = re.sub(r'\s+', ' ', r.stdout)
            m = re.search(r'Not shown, 0 in every row: (.*?) \(--wide', flat)
            if m:
                hidden = set(m.group(1).split(', '))
            self.assertEqual(seen | hidden, names, f'COLUMNS={columns}: every column somewhere')
            self.assertFalse(seen & hidden)
            if width >= 200:
                self.assertEqual(len(blocks), 1)
            if width <= 100:
                self.assertGreater(len(blocks), 1)
        # A terminal 300 wide holds the whole table: one block, nothing hidden.
        r = recap('report', log, env={'COLUMNS': '300'})
        self.assertNotIn('Not shown', r.stdout)

    def test_groups_name_their_columns(self):
        lines = recap('report', '--wide', labelled_run(self)).stdout.splitlines()
        groups, header = lines[0], lines[1]
        for name, columns in recap_report.GROUPS:
            # Values here are narrower than the headers: a group's title
            # starts where its first column's header does.
            first = re.search(r'\b' + columns[0][0] + r'\b', header).start()
            self.assertEqual(groups.index(name + ' '), first, name)

    def test_rank_table_fits_too(self):
        logs = []
        for rank in range(3):
            logs.append(self.write(f'r{rank}.jsonl', [
                start(pid=10 + rank, rank=rank, rank_var='RANK', world_size=3),
                site(A, INDUCTOR, pid=10 + rank),
                ev('end', pid=10 + rank, sites=[end_entry(A, 40 + rank, 3)], totals={})]))
        r = recap('report', *logs)
        for line in r.stdout.splitlines():
            self.assertLessEqual(len(line), 100, line)
        for _, header, rows in table_blocks(r.stdout):
            self.assertEqual(header[:3], ['SITE', 'LABEL', 'RANK'])
            self.assertEqual([(row[0], row[2]) for row in rows[:4]],
                             [(A, '0'), (A, '1'), (A, '2'), (A, 'all')])


class Csv(Base):
    def test_csv_has_the_json_rows(self):
        log = labelled_run(self)
        r = recap('report', '--csv', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        data = json.loads(recap('report', '--json', log).stdout)
        self.assertEqual([row['site'] for row in rows], [s['site'] for s in data['sites']] +
                         ['total'])
        for row, want in zip(rows, data['sites']):
            self.assertEqual(row['label'], want['label'])
            self.assertEqual(row['rank'], 'all')
            for key in ('captures', 'recaptured', 'fallbacks', 'reused', 'eligible'):
                self.assertEqual(int(row[key]), want[key], key)
            self.assertAlmostEqual(float(row['saved_us']), want['saved_us'], places=1)
            self.assertEqual(json.loads(row['fallback_reasons']), want['fallback_reasons'])
        self.assertEqual(int(rows[-1]['captures']), data['totals']['captures'])

    def test_csv_rows_per_rank(self):
        logs = [self.write(f'r{rank}.jsonl', [
            start(pid=10 + rank, rank=rank, rank_var='RANK', world_size=2),
            ev('end', pid=10 + rank, sites=[end_entry(A, 10 * (rank + 1), rank)], totals={})])
            for rank in range(2)]
        rows = list(csv.DictReader(io.StringIO(recap('report', '--csv', *logs).stdout)))
        self.assertEqual([(r['site'], r['rank'], r['captures']) for r in rows],
                         [(A, '0', '10'), (A, '1', '20'), (A, 'all', '30'),
                          ('total', '0', '10'), ('total', '1', '20'), ('total', 'all', '30')])

    def test_one_form_at_a_time(self):
        log = self.write('x.jsonl', [capture(A, 'fresh')])
        r = recap('report', '--csv', '--json', log)
        self.assertEqual(r.returncode, 2)
        self.assertIn('not allowed with argument', r.stderr)


class ManyProcesses(Base):
    """Logs of many processes (a pytest run, many short runs, a job of many
    ranks): in the table, an `all` row only for a site that two processes or
    more share, and no rows for the processes that captured nothing (a line
    counts them); --json and --csv keep every row."""

    def many(self, idle=4, capturing=(10, 11, 12)):
        """pids 10 and 11 share site A (their end events count it); pid 12
        alone has C (counted from its events: killed before its end event);
        pids 13 on captured nothing: started and ended, the last killed after
        a warning."""
        logs = []
        for pid in capturing:
            if pid == 12:
                lines = [start(pid=pid), site(C, SHORT, pid=pid)] + [
                    capture(C, 'fresh' if seq == 1 else 'recapture', seq, pid=pid)
                    for seq in (1, 2, 3)]
            else:
                lines = [start(pid=pid), site(A, DECODE, pid=pid),
                         capture(A, 'fresh', 1, pid=pid),
                         ev('end', pid=pid, sites=[end_entry(A, 20 + pid, 2)], totals={})]
            logs.append(self.write(f'recap-{pid}.jsonl', lines))
        for pid in range(13, 13 + idle):
            last = (ev('end', pid=pid, sites=[], totals={}) if pid < 12 + idle else
                    ev('warning', pid=pid, site=None, message='no driver'))
            logs.append(self.write(f'recap-{pid}.jsonl', [start(pid=pid), last]))
        return logs

    def rows(self, *logs):
        """The --wide table's rows as (site, rank, captures), and the text."""
        r = recap('report', '--wide', *logs)
        self.assertEqual(r.returncode, 0, r.stderr)
        (block,) = table_blocks(r.stdout)
        _, header, rows = block
        self.assertEqual(header[:3], ['SITE', 'LABEL', 'RANK'])
        # The totals have no label: one cell fewer.
        return [tuple(row[:1] + row[1 + (row[0] != 'total'):][:2]) for row in rows], r.stdout

    def test_all_row_only_where_processes_share_a_site(self):
        rows, text = self.rows(*self.many())
        self.assertEqual(rows, [(A, 'pid:10', '30'), (A, 'pid:11', '31'), (A, 'all', '61'),
                                (C, 'pid:12', '3'),
                                ('total', 'pid:10', '30'), ('total', 'pid:11', '31'),
                                ('total', 'pid:12', '3'), ('total', 'all', '64')])
        self.assertIn('4 process(es) captured nothing and are left out (pid:13, pid:14, '
                      'pid:15, pid:16)', ' '.join(text.split()))
        self.assertIn('7 process(es), 5 with an end event', text)

    def test_one_process_captured(self):
        # Its rows are the totals: no `all` row repeats them.
        rows, text = self.rows(*self.many(idle=3, capturing=(10,)))
        self.assertEqual(rows, [(A, 'pid:10', '30'), ('total', 'pid:10', '30')])
        self.assertIn('3 process(es) captured nothing and are left out (pid:13, pid:14, '
                      'pid:15)', ' '.join(text.split()))

    def test_many_left_out_named_up_to_eight(self):
        rows, text = self.rows(*self.many(idle=20))
        self.assertEqual(len(rows), 8)
        self.assertIn('20 process(es) captured nothing and are left out (pid:13, pid:14, '
                      'pid:15, pid:16, pid:17, pid:18, pid:19, pid:20, and 12 more)',
                      ' '.join(text.split()))
        for line in recap('report', *self.many(idle=20)).stdout.splitlines():
            self.assertLessEqual(len(line), 100, line)

    def test_ranks_that_captured_nothing(self):
        # Four ranks: A on 0 and 1, C on 2 alone, rank 3 never captured.
        logs = [self.write(f'r{rank}.jsonl', [
            start(pid=50 + rank, rank=rank, rank_var='RANK', world_size=4),
            ev('end', pid=50 + rank,
               sites=[end_entry(A if rank < 2 else C, 10 + rank, 1)] if rank < 3 else [],
               totals={})]) for rank in range(4)]
        rows, text = self.rows(*logs)
        self.assertEqual(rows, [(A, '0', '10'), (A, '1', '11'), (A, 'all', '21'), (C, '2', '12'),
                                ('total', '0', '10'), ('total', '1', '11'), ('total', '2', '12'),
                                ('total', 'all', '33')])
        self.assertIn('1 process(es) captured nothing and are left out (rank 3)', text)
        self.assertNotIn('no log from rank', text, 'rank 3 wrote a log')

    def test_one_process_that_captured_nothing_keeps_the_plain_table(self):
        r = recap('report', '--wide', self.many(idle=1, capturing=())[0])
        self.assertEqual(r.stdout.splitlines()[1].split()[:3], ['SITE', 'LABEL', 'CAPTURES'])
        self.assertIn('total', r.stdout)
        self.assertNotIn('left out', r.stdout, 'no rank rows to leave out')

    def test_json_and_csv_keep_every_row(self):
        # Scripts read every site's `all` row and every rank's total, zeros
        # included; the JSON counts the processes the table leaves out.
        logs = self.many()
        data = json.loads(recap('report', '--json', *logs).stdout)
        self.assertEqual(data['processes_captured_nothing'], 4)
        self.assertEqual(data['processes'], 7)
        self.assertEqual([(s['site'], s['captures']) for s in data['sites']], [(A, 61), (C, 3)])
        self.assertEqual([(r['site'], r['rank']) for r in data['by_rank']],
                         [(A, 'pid:10'), (A, 'pid:11'), (C, 'pid:12')])
        self.assertEqual([(t['rank'], t['captures']) for t in data['rank_totals']],
                         [('pid:10', 30), ('pid:11', 31), ('pid:12', 3), ('pid:13', 0),
                          ('pid:14', 0), ('pid:15', 0), ('pid:16', 0)])
        rows = list(csv.DictReader(io.StringIO(recap('report', '--csv', *logs).stdout)))
        self.assertEqual([(r['site'], r['rank'], r['captures']) for r in rows], [
            (A, 'pid:10', '30'), (A, 'pid:11', '31'), (A, 'all', '61'),
            (C, 'pid:12', '3'), (C, 'all', '3'),
            ('total', 'pid:10', '30'), ('total', 'pid:11', '31'), ('total', 'pid:12', '3'),
            ('total', 'pid:13', '0'), ('total', 'pid:14', '0'), ('total', 'pid:15', '0'),
            ('total', 'pid:16', '0'), ('total', 'all', '64')])
        data = json.loads(recap('report', '--json', self.many(idle=1, capturing=())[0]).stdout)
        self.assertEqual(data['processes_captured_nothing'], 1)


class FallbackReasons(Base):
    def events(self, n, reasons, first_seq=2):
        return [capture(A, 'fallback', first_seq + i, reason=reasons[i % len(reasons)])
                for i in range(n)]

    def report(self, *lines):
        log = self.write('f.jsonl', list(lines))
        data = json.loads(recap('report', '--json', log).stdout)
        text = recap('report', log).stdout
        return data['sites'][0], text

    def test_exact_from_the_end_event(self):
        # 2 fallback events logged of 500; the end event counts them all.
        row, text = self.report(
            start(), site(A, SHORT), *self.events(2, ['topology differs']),
            ev('end', sites=[end_entry(A, 1000, 500, fallback_reasons={
                'topology differs': 420, 'kernel function differs': 80})], totals={}))
        self.assertEqual(row['fallback_reasons'], {'topology differs': 420,
                                                   'kernel function differs': 80})
        self.assertFalse(row['fallback_reasons_sampled'])
        self.assertIn('Fallbacks by reason:', text)
        self.assertIn('500 of 1000 captures fell back', text)
        self.assertNotIn('sampled', text)
        lines = text.splitlines()
        at = lines.index('Fallbacks by reason:')
        self.assertEqual(lines[at + 1].split()[:2], [A, 'train.py:33'])
        self.assertEqual(lines[at + 3].split(None, 1), ['420', 'topology differs'])
        self.assertEqual(lines[at + 4].split(None, 1), ['80', 'kernel function differs'])

    def test_events_exact_when_every_fallback_was_logged(self):
        row, text = self.report(
            start(), *self.events(3, ['a', 'b', 'a']),
            ev('end', sites=[end_entry(A, 10, 3)], totals={}))
        self.assertEqual(row['fallback_reasons'], {'a': 2, 'b': 1})
        self.assertFalse(row['fallback_reasons_sampled'])
        self.assertNotIn('sampled', text)

    def test_sampled_when_the_end_event_counts_more(self):
        row, text = self.report(
            start(), *self.events(3, ['a', 'b', 'a']),
            ev('end', sites=[end_entry(A, 200, 150)], totals={}))
        self.assertEqual(row['fallback_reasons'], {'a': 2, 'b': 1})
        self.assertTrue(row['fallback_reasons_sampled'])
        self.assertEqual(row['fallbacks_logged'], 3)
        self.assertIn('150 of 200 captures fell back; sampled: the log holds 3 of them', text)

    def test_sampled_without_end_event_past_the_routine_limit(self):
        row, _ = self.report(start(), *self.events(3, ['a'], first_seq=62))
        self.assertFalse(row['fallback_reasons_sampled'], 'seq 64 and before: all logged')
        row, _ = self.report(start(), *self.events(3, ['a'], first_seq=100))
        self.assertTrue(row['fallback_reasons_sampled'])
        row, _ = self.report(start(routine_events_full=200), *self.events(3, ['a'],
                                                                           first_seq=100))
        self.assertFalse(row['fallback_reasons_sampled'], "the start event's limit counts")

    def test_switch_call_and_candidates(self):
        lines = [start()]
        for seq, call in ((2, 'cuLaunchKernel'), (3, 'cuLaunchKernel'), (4, 'cuMemcpyAsync')):
            e = json.loads(capture(A, 'fallback', seq, reason='kernel differs'))
            e.update(switch_call=call, candidates=3)
            lines.append(json.dumps(e))
        e = json.loads(capture(A, 'recapture', 5))
        e['candidates'] = 1
        lines.append(json.dumps(e))
        row, text = self.report(*lines)
        self.assertEqual(row['fallback_switch_calls'],
                         {'kernel differs': {'cuLaunchKernel': 2, 'cuMemcpyAsync': 1}})
        self.assertEqual(row['candidates'], {'logged': 4, 'mean': 2.5, 'max': 3})
        self.assertIn('kernel differs (switched to a driver capture at cuLaunchKernel (2x), '
                      'cuMemcpyAsync (1x))', ' '.join(text.split()))
        self.assertIn('matched against 2.5 kept graph(s) on average, 3 at most', text)

    def test_ranks_merge_exactness(self):
        # Exact on one rank, sampled on the other: sampled overall.
        logs = [self.write('a.jsonl', [start(pid=1, rank=0, rank_var='RANK'),
                                       ev('end', pid=1, sites=[end_entry(A, 10, 4, fallback_reasons={
                                           'x': 4})], totals={})]),
                self.write('b.jsonl', [start(pid=2, rank=1, rank_var='RANK'),
                                       capture(A, 'fallback', 2, reason='y', pid=2),
                                       ev('end', pid=2, sites=[end_entry(A, 10, 2)],
                                          totals={})])]
        data = json.loads(recap('report', '--json', *logs).stdout)
        self.assertEqual(data['sites'][0]['fallback_reasons'], {'x': 4, 'y': 1})
        self.assertTrue(data['sites'][0]['fallback_reasons_sampled'])
        ranks = {r['rank']: r for r in data['by_rank']}
        self.assertFalse(ranks['0']['fallback_reasons_sampled'])
        self.assertTrue(ranks['1']['fallback_reasons_sampled'])

    def test_bad_fallback_reasons_ignored(self):
        row, _ = self.report(start(), *self.events(1, ['a']),
                             ev('end', sites=[end_entry(A, 10, 1, fallback_reasons={
                                 'a': 'many'})], totals={}))
        self.assertEqual(row['fallback_reasons'], {'a': 1})
        self.assertFalse(row['fallback_reasons_sampled'])


def step_sums(periods=10, **per_period):
    """An end event's step object: per_period's figures (µs and calls per
    period, as CLASS_us and CLASS) times the periods; every class present."""
    out = {'periods': periods, 'period_us': periods * per_period.pop('period_us', 0.0)}
    for c in ('capture', 'instantiate', 'launch', 'alloc', 'free', 'host_alloc', 'host_free',
              'sync'):
        out[c] = periods * per_period.pop(c, 0)
        out[c + '_us'] = periods * per_period.pop(c + '_us', 0.0)
    assert not per_period, per_period
    return out


# The example: a period of 2.54 ms.
EXAMPLE = dict(period_us=2540.0, capture=1, capture_us=1880.0, instantiate=1,
               instantiate_us=80.0, launch=1, launch_us=30.0, alloc=2, alloc_us=210.0, free=2,
               free_us=180.0, sync=1, sync_us=10.0)


class LeftToTheDriver(Base):
    """Captures recap left to the driver, by reason (fresh_reasons)."""

    def report(self, *lines):
        log = self.write('d.jsonl', list(lines))
        return (json.loads(recap('report', '--json', log).stdout)['sites'][0],
                recap('report', log).stdout)

    HELD = 'the program keeps its graphs here and copies are off (RECAP_COPY_HELD=off)'

    def test_exact_from_the_end_event_first_captures_aside(self):
        row, text = self.report(
            start(), site(A, SHORT), capture(A, 'fresh', 1, reason='first capture at this site'),
            capture(A, 'fresh', 2, reason=self.HELD),
            ev('end', sites=[end_entry(A, 100, 0, fresh=100, recaptured=0, by_recap=0,
                                       fresh_reasons={'first capture at this site': 1,
                                                      self.HELD: 97, 'the gate is closed': 2})],
               totals={}))
        self.assertEqual(row['fresh_reasons'][self.HELD], 97)
        self.assertFalse(row['fresh_reasons_sampled'])
        lines = text.splitlines()
        at = lines.index("Left to the driver by reason (each process's first capture at a site "
                         "aside):")
        self.assertEqual(lines[at + 1].split()[:2], [A, 'train.py:33'])
        self.assertEqual(lines[at + 2].strip(), "100 of 100 captures were the driver's")
        self.assertEqual(lines[at + 3].split(None, 1)[0], '97')
        self.assertIn('the program keeps its graphs here', lines[at + 3])
        self.assertIn(['2', 'the gate is closed'], [l.split(None, 1) for l in lines[at + 4:]])
        self.assertNotIn('first capture at this site', '\n'.join(lines[at:]))

    def test_sampled_without_the_end_events_count_and_absent_when_only_firsts(self):
        row, text = self.report(start(), site(A, SHORT),
                                capture(A, 'fresh', 1, reason='first capture at this site'),
                                capture(A, 'fresh', 2, reason=self.HELD))
        self.assertTrue(row['fresh_reasons_sampled'])
        self.assertIn("2 of 2 captures were the driver's; sampled", text)
        _, text = self.report(start(), site(A, SHORT),
                              capture(A, 'fresh', 1, reason='first capture at this site'),
                              ev('end', sites=[end_entry(A, 5, 0, fresh_reasons={
                                  'first capture at this site': 1})], totals={}))
        self.assertNotIn('Left to the driver', text)


class StepTime(Base):
    """Where a step's time goes: a line per site from the end event's step
    object, the figures in --json, the program's own time derived."""

    def report(self, *ends):
        lines = [start(), site(A, SHORT)]
        lines += [ev('end', sites=[e], totals={}) for e in ends]
        log = self.write('s.jsonl', lines)
        data = json.loads(recap('report', '--json', log).stdout)
        text = recap('report', log).stdout
        return data, text

    def test_line_and_json(self):
        data, text = self.report(end_entry(A, 11, 0, step=step_sums(**EXAMPLE)))
        flat = ' '.join(text.split())
        self.assertIn("Where a step's time goes (mean per period, from one capture begin at the "
                      "site to the next; program's own = the period less the rest):", flat)
        self.assertIn("period 2.54 ms = capture 1.88 + instantiate 0.08 + launch 0.03 + driver "
                      "between captures 0.40 (2 alloc 0.21, 2 free 0.18, 1 sync 0.01) + "
                      "program's own 0.15 [10 periods; recap saved about 0.10 ms a period in "
                      "instantiations (estimated)]", flat)
        (row,) = data['sites']
        self.assertEqual(row['step']['periods'], 10)
        self.assertAlmostEqual(row['step']['alloc_us'], 2100.0)
        self.assertEqual(row['step']['free'], 20)
        per = row['step_per_period']
        self.assertAlmostEqual(per['period'], 2540.0)
        self.assertAlmostEqual(per['between'], 400.0)
        self.assertAlmostEqual(per['own'], 150.0)
        self.assertAlmostEqual(per['saved'], 98.0, msg='(10 reuses x 100 µs - 20 µs) / 10')
        self.assertAlmostEqual(per['calls']['alloc'], 2.0)
        self.assertAlmostEqual(data['totals']['step_per_period']['own'], 150.0)
        self.assertEqual(data['totals']['step']['periods'], 10)

    def test_overlapping_parts_have_no_own_time(self):
        # Captures on several threads at once: the parts add up to more
        # than the period; the program's own time is not made up.
        data, text = self.report(end_entry(A, 11, 0, step=step_sums(
            period_us=100.0, capture=2, capture_us=150.0)))
        self.assertIsNone(data['sites'][0]['step_per_period']['own'])
        self.assertIn("program's own - (the parts overlap: captures on several threads at once)",
                      ' '.join(text.split()))

    def test_no_line_without_a_period(self):
        data, text = self.report(end_entry(A, 11, 0))
        self.assertIsNone(data['sites'][0]['step'])
        self.assertIsNone(data['sites'][0]['step_per_period'])
        self.assertNotIn("Where a step's time goes", text)
        data, text = self.report(end_entry(A, 1, 0, step={'periods': 0, 'period_us': 0.0}))
        self.assertNotIn("Where a step's time goes", text)

    def test_microseconds_where_the_period_is_short(self):
        _, text = self.report(end_entry(A, 11, 0, step=step_sums(
            period_us=79.5, capture=1, capture_us=50.1, launch=1, launch_us=1.0, sync=1,
            sync_us=0.1)))
        self.assertIn('period 79.5 µs = capture 50.1 + instantiate 0.0 + launch 1.0 + driver '
                      'between captures 0.1 (1 sync 0.1)', ' '.join(text.split()))

    def test_processes_sum(self):
        logs = [self.write(f'{r}.jsonl', [start(pid=r + 1, rank=r, rank_var='RANK'),
                                           ev('end', pid=r + 1, totals={}, sites=[end_entry(
                                               A, 11, 0, step=step_sums(**EXAMPLE))])])
                for r in (0, 1)]
        data = json.loads(recap('report', '--json', *logs).stdout)
        self.assertEqual(data['sites'][0]['step']['periods'], 20)
        self.assertAlmostEqual(data['sites'][0]['step_per_period']['own'], 150.0)
        self.assertEqual([r['step']['periods'] for r in data['by_rank']], [10, 10])


class MemoryHandedBack(Base):
    """One line says how often recap handed memory back instead of the
    driver allocating it again: device memory summed over sites (and over
    processes), pinned host memory from the totals; none where nothing was
    handed back."""

    def text(self, *ends):
        lines = [start(pid=pid) for pid in range(100, 100 + len(ends))]
        lines += [ev('end', pid=100 + i, **end) for i, end in enumerate(ends)]
        return recap('report', self.write('m.jsonl', lines)).stdout

    def test_device_and_pinned_host_memory(self):
        mib = 1 << 20
        text = self.text(
            dict(sites=[end_entry(A, 10, 0, memory_reused=9, memory_reused_bytes=18 * mib),
                        end_entry(B, 10, 0)],
                 totals={'host_memory': {'tracked': 2, 'kept': 20, 'reused': 18,
                                         'reused_bytes': 9 * mib}}),
            dict(sites=[end_entry(A, 10, 0, memory_reused=3, memory_reused_bytes=6 * mib)],
                 totals={}))
        flat = ' '.join(text.split())
        self.assertIn('device memory 12 time(s) (24.0 MiB) at 1 site(s)', flat)
        self.assertIn('pinned host memory 18 time(s) (9.0 MiB)', flat)

    def test_nothing_handed_back_says_nothing(self):
        text = self.text(dict(sites=[end_entry(A, 10, 0)], totals={}))
        self.assertNotIn('handed back by recap', text)


class RealRun(Base):
    """The scenario program on the stand-in driver under librecap: the
    report of a real log fits 100 columns and agrees with --csv."""

    def test_real_log(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(('RECAP_', 'STANDIN_', 'SCENARIO_')) and k != 'LD_PRELOAD'}
        log = os.path.join(self.dir, 'real.jsonl')
        env.update(LD_PRELOAD=preload_value(os.environ.get('RECAP_TEST_PRELOAD_PREFIX'),
                                            os.environ['RECAP_LIB']),
                   RECAP_LOG=log, STANDIN_DRIVER_VERSION='13000')
        p = subprocess.run([os.environ['SCENARIO_BIN'], 'params', '120'], env=env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = recap('report', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(all(len(line) <= 100 for line in r.stdout.splitlines()), r.stdout)
        rows = list(csv.DictReader(io.StringIO(recap('report', '--csv', log).stdout)))
        self.assertEqual(int(rows[-1]['captures']), 120)
        self.assertGreater(int(rows[-1]['reused']), 100)
        # Where its step time went: 119 periods, each one capture, one
        # instantiation, one launch and one synchronisation.
        self.assertIn("Where a step's time goes", r.stdout)
        data = json.loads(recap('report', '--json', log).stdout)
        step = data['sites'][0]['step']
        self.assertEqual(step['periods'], 119)
        for c in ('capture', 'instantiate', 'launch', 'sync'):
            self.assertEqual(step[c], 119, c)
        self.assertEqual(step['alloc'], 0)
        self.assertGreater(step['capture_us'], 0)
        self.assertIsNotNone(data['sites'][0]['step_per_period']['own'])


if __name__ == '__main__':
    unittest.main()
