#!/usr/bin/env python3
"""test_html.py - `recap report --html FILE`: one self-contained page, a
lane group per process (rank, else pid) and a lane per site in it, with the
site's logged captures and instantiations as marks, its back-offs, its
timeline rows, its reasons, frames and totals; honest about thinned logs;
small for large logs. Read here with html.parser; tests/cli/
test_html_browser.py loads pages in Chromium.

Environment (set by meson): RECAP_SCRIPT, RECAP_LIB, SCENARIO_BIN and the
stand-in's variables."""

import html.parser
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
from test_report import DECODE, INDUCTOR, end_entry, site, start  # noqa: E402
import recap_html  # noqa: E402
import recap_report  # noqa: E402

A = '00000000000000aa'
B = '00000000000000bb'


class Element:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children, self.text = [], ''

    def classes(self):
        return (self.attrs.get('class') or '').split()

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, tag=None, cls=None):
        return [e for e in self.walk() if (tag is None or e.tag == tag)
                and (cls is None or cls in e.classes())]

    def all_text(self):
        return self.text + ''.join(c.all_text() for c in self.children)


VOID = {'meta', 'br', 'img', 'input', 'link', 'hr'}


class Tree(html.parser.HTMLParser):
    """The page as a tree; fails on a closing tag that does not match."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = Element('#root', {}, None)
        self.at = self.root
        self.feed(text)
        self.close()
        assert self.at is self.root, f'unclosed <{self.at.tag}>'

    def handle_starttag(self, tag, attrs):
        e = Element(tag, attrs, self.at)
        self.at.children.append(e)
        if tag not in VOID:
            self.at = e

    def handle_startendtag(self, tag, attrs):
        self.at.children.append(Element(tag, attrs, self.at))

    def handle_endtag(self, tag):
        assert self.at.tag == tag, f'</{tag}> closes <{self.at.tag}>'
        self.at = self.at.parent

    def handle_data(self, data):
        self.at.text += data


def marks(lane, row):
    """The lane's single marks of a row ('c' captures, 'i' instantiations):
    rects with a title of their own (binned marks sit in a <g>)."""
    return [r for r in lane.find('rect') if any(c.startswith(row + '-') for c in r.classes())
            and r.children and r.children[0].tag == 'title']


class PageBase(Base):
    def page(self, *logs, expect=0):
        out = os.path.join(self.dir, 'page.html')
        r = recap('report', '--html', out, *logs)
        self.assertEqual(r.returncode, expect, r.stderr)
        with open(out, encoding='utf-8') as f:
            text = f.read()
        return text, Tree(text).root, r

    def lanes(self, root):
        return {(g.attrs['data-rank'], lane.attrs['data-site']): lane
                for g in root.find('section', 'group') for lane in g.find('section', 'lane')}


class Page(PageBase):
    def test_self_contained(self):
        log = self.write('a.jsonl', [start(), site(A, 'x.py:1 (f)'), capture(A, 'fresh'),
                                     inst(A, 'new', 50.0)])
        text, root, r = self.page(log)
        self.assertIn('wrote', r.stdout)
        for needle in ('http://', 'https://', '<link', '@import', 'url(', ' src=', '//cdn'):
            self.assertNotIn(needle, text, needle)
        self.assertEqual(len(root.find('style')), 1)
        (script,) = root.find('script')
        self.assertLess(len(script.text), 600, 'a small inline script at most')
        self.assertTrue(text.startswith('<!DOCTYPE html>'))

    def test_lanes_per_process_and_site(self):
        r0 = self.write('r0.jsonl', [
            start(pid=10, rank=0, rank_var='RANK', world_size=2),
            site(A, 'decode @ model.py:12 (forward)', pid=10), site(B, None, pid=10),
            capture(A, 'fresh', 1, reason='first capture', pid=10), inst(A, 'new', 400.0, pid=10),
            capture(A, 'recapture', 2, eligible=3, pid=10), inst(A, 'update', 20.0, pid=10),
            capture(A, 'fallback', 3, reason='kernel differs', pid=10),
            inst(A, 'new', 380.0, pid=10),
            capture(B, 'observe', 1, reason='observed only', pid=10),
            ev('end', pid=10, sites=[end_entry(A, 3, 1), end_entry(B, 1, 0, fresh=0,
                                                                    observed=1)], totals={})])
        r1 = self.write('r1.jsonl', [
            start(pid=20, rank=1, rank_var='RANK', world_size=2),
            site(A, 'decode @ model.py:12 (forward)', pid=20),
            capture(A, 'fresh', 1, reason='first capture', pid=20), inst(A, 'new', 300.0, pid=20),
            ev('end', pid=20, sites=[end_entry(A, 1, 0)], totals={})])
        _, root, _ = self.page(r1, r0)
        groups = root.find('section', 'group')
        self.assertEqual([g.attrs['data-rank'] for g in groups], ['0', '1'], 'ranks in order')
        lanes = self.lanes(root)
        self.assertEqual(sorted(lanes), [('0', A), ('0', B), ('1', A)])
        a0 = lanes[('0', A)]
        self.assertEqual(a0.attrs['data-captures'], '3')
        self.assertEqual(a0.attrs['data-logged-captures'], '3')
        self.assertEqual([m.classes()[0] for m in marks(a0, 'c')],
                         ['c-fresh', 'c-driver', 'c-fallback'], 'no "by": the driver\'s')
        self.assertEqual([m.classes()[0] for m in marks(a0, 'i')], ['i-new', 'i-update', 'i-new'])
        titles = [m.children[0].text for m in marks(a0, 'c')]
        self.assertIn('capture 3: fallback - kernel differs', titles[2])
        self.assertIn('3 changed (3 eligible, 0 ineligible)', titles[1])
        self.assertIn('decode @ model.py:12 (forward)', a0.find('h3')[0].all_text())
        self.assertIn(A, a0.find('h3')[0].all_text())
        self.assertIn('3 captures: 1 recaptured', a0.find('p', 'figures')[0].all_text())
        self.assertEqual(marks(lanes[('0', B)], 'c')[0].classes(), ['c-observe'])
        # The overall totals, as the table counts them.
        table = root.find('table')[0]
        total = [tr for tr in table.find('tr') if 'total' in tr.classes()][0]
        self.assertEqual([td.all_text() for td in total.find('td')][2], '5')

    def test_thinned_lane_says_so_and_draws_the_timeline(self):
        lines = [start(), site(A, 'x.py:1 (f)')]
        seqs = list(range(1, 65)) + [128, 256, 512]
        lines += [capture(A, 'recapture' if s > 1 else 'fresh', s) for s in seqs]
        lines.append(ev('reuse', site=A, state='stopped', reason='40 misses against 24 hits',
                        seq=600, backoff=64, hits=24, misses=40))
        lines.append(ev('reuse', site=A, state='resumed', reason='the back-off elapsed',
                        seq=664, backoff=0, hits=0, misses=0))
        by_recap = [31] + [32] * 30 + [8]
        by_recap[18] = 30
        lines.append(ev('timeline', site=A, window=32, windows=32, by_recap=by_recap,
                        fallback=[0] * 18 + [2] + [0] * 13, fresh=[1] + [0] * 31,
                        capture_us=[100] * 32, inst_us=[50] * 32))
        lines.append(ev('end', sites=[end_entry(A, 1000, 2)], totals={}))
        text, root, _ = self.page(self.write('t.jsonl', lines))
        (lane,) = root.find('section', 'lane')
        note = lane.find('p', 'note')[0].all_text()
        self.assertIn('The log holds 67 of this site\'s 1,000 captures', note)
        self.assertIn('32 to a bar', note)
        self.assertEqual(len(marks(lane, 'c')), 67)
        svg_text = lane.find('svg')[0].all_text()
        self.assertIn('all captures', svg_text)
        titles = [t.text for t in lane.find('title')]
        self.assertTrue(any(t.startswith('captures 577-608: 30 recorded by recap, 2 fallback')
                            for t in titles), titles)
        self.assertTrue(any('per capture' in t for t in titles))
        backoff = [r for r in lane.find('rect') if 'backoff' in r.classes()]
        self.assertEqual(len(backoff), 1)
        self.assertIn('back-off at capture 600: keeps nothing and looks for nothing for 64 '
                      'captures - 40 misses against 24 hits', backoff[0].children[0].text)
        ticks = [t for t in lane.find('line') if 'tick' in t.classes()]
        self.assertEqual(len(ticks), 1)
        self.assertIn('resumed at capture 664', ticks[0].children[0].text)

    def test_no_end_event_and_no_timeline(self):
        lines = [start(), site(A, None)] + [capture(A, 'recapture', s) for s in (1, 2, 3)]
        _, root, _ = self.page(self.write('k.jsonl', lines))
        (lane,) = root.find('section', 'lane')
        notes = ' '.join(p.all_text() for p in lane.find('p', 'note'))
        self.assertIn('No end event from this process', notes)
        self.assertNotIn('The log holds', notes)
        self.assertNotIn('all captures', lane.find('svg')[0].all_text())

    def test_reasons_frames_and_escaping(self):
        evil = '<script>alert(1)</script> @ a.py:3 (f)'
        lines = [start(), ev('site', site=A, frames=['app+0x10 step+0x4', 'libc.so.6+0x2a'],
                             label=evil, mode='auto', nvtx='decode',
                             python={'version': '3.11', 'gil': 'held',
                                     'frames': ['a.py:3 (f)', 'b.py:9 (main)']}, c_frames=1),
                 capture(A, 'fresh', 1, reason='first capture'),
                 capture(A, 'fallback', 2, reason='kernel <differs>'),
                 ev('warning', site=A, message='could not keep it'),
                 ev('end', sites=[end_entry(A, 2, 1, fallback_reasons={'kernel <differs>': 1})],
                    totals={})]
        text, root, _ = self.page(self.write('e.jsonl', lines))
        self.assertNotIn('<script>alert', text)
        self.assertEqual(len(root.find('script')), 1)
        (lane,) = root.find('section', 'lane')
        self.assertIn(evil, lane.find('h3')[0].all_text())
        details = {d.find('summary')[0].all_text(): d for d in lane.find('details')}
        self.assertIn('fallbacks by reason (1)', details)
        self.assertIn('1 × kernel <differs>', details['fallbacks by reason (1)'].all_text())
        self.assertIn('fresh captures by reason (logged) (1)', details)
        # Counted by the end event (fresh_reasons): every one, not "logged".
        lines[-1] = ev('end', sites=[end_entry(A, 40, 1, fresh=39, fresh_reasons={
            'first capture': 1, 'the program keeps its graphs here': 38})], totals={})
        _, root, _ = self.page(self.write('f.jsonl', lines))
        (lane,) = root.find('section', 'lane')
        details = {d.find('summary')[0].all_text(): d for d in lane.find('details')}
        self.assertIn('38 × the program keeps its graphs here',
                      details['fresh captures by reason (39)'].all_text())
        self.assertIn('warning: could not keep it',
                      details['warnings and errors (1)'].all_text())
        frames = details['frames and range'].all_text()
        for want in ('NVTX range: decode', 'Python frames (GIL held at the capture):',
                     'a.py:3 (f)', 'b.py:9 (main)', 'C frames (the first 1 in the id):',
                     'app+0x10 step+0x4'):
            self.assertIn(want, frames)

    def test_label_cell_short_whole_stack_on_hover(self):
        python = {'version': '3.11', 'gil': 'held',
                  'frames': ['/tmp/torchinductor_root/xq/cxqz.py:1022 (call)',
                             '/usr/lib/torch/_inductor/cudagraph_trees.py:2087 (run)',
                             '/home/user/train.py:40 (main)']}
        c_frames = ['libcudart.so.13+0x76473 cudaStreamBeginCapture+0x1e3',
                    'libtorch_cuda.so+0xcb2dfc _ZN2at4cuda9CUDAGraph13capture_begin+0x29c',
                    'python3.11+0x18216f']
        lines = [start(), ev('site', site=A, frames=c_frames, label=INDUCTOR, mode='auto',
                             nvtx='decode', python=python, c_frames=2),
                 capture(A, 'fresh', 1, reason='first capture'),
                 ev('site', site=B, frames=['app+0x10 step+0x4', 'libc.so.6+0x2a'], label=None,
                    mode='auto'),
                 capture(B, 'fresh', 1, reason='first capture')]
        _, root, _ = self.page(self.write('l.jsonl', lines))
        table = root.find('table')[0]
        cells = {tds[0].all_text(): tds[1] for tds in (tr.find('td') for tr in table.find('tr'))
                 if tds}
        a = cells[A]
        self.assertIn('label', a.classes())
        # The cell: the label as the text table shortens it, file and line kept.
        self.assertEqual(a.all_text(), recap_report.shorten_label(INDUCTOR, recap_html.LABEL_CELL))
        self.assertLessEqual(len(a.all_text()), recap_html.LABEL_CELL)
        self.assertIn('.py:1022 (call)', a.all_text())
        self.assertNotIn('cudagraph_trees', a.all_text())
        # The hover: the whole label and every frame, a line each.
        hover = a.attrs['title'].split('\n')
        self.assertEqual(hover[0], INDUCTOR)
        for want in ['NVTX range: decode'] + python['frames'] + c_frames:
            self.assertIn(want, [line.strip() for line in hover])
        b = cells[B]
        self.assertEqual(b.all_text(), '(no label) · app+0x10 step+0x4')
        self.assertIn('  libc.so.6+0x2a', b.attrs['title'].split('\n'))
        self.assertEqual(cells['total'].all_text(), '')
        self.assertNotIn('title', cells['total'].attrs)

    def test_processes_that_captured_nothing_get_no_group(self):
        logs = [self.write(f'p{pid}.jsonl', [
            start(pid=pid), site(A, DECODE, pid=pid), capture(A, 'fresh', 1, pid=pid),
            capture(A, 'recapture', 2, pid=pid),
            ev('end', pid=pid, sites=[end_entry(A, 2, 0)], totals={})]) for pid in (10, 11)]
        logs += [self.write(f'p{pid}.jsonl', [start(pid=pid), ev('end', pid=pid, sites=[],
                                                                  totals={})])
                 for pid in range(12, 15)]
        _, root, r = self.page(*logs)
        self.assertEqual([g.attrs['data-pid'] for g in root.find('section', 'group')],
                         ['10', '11'])
        self.assertIn('3 process(es) captured nothing and are left out',
                      root.find('header')[0].all_text())
        self.assertIn('2 lane(s), 5 process(es)', r.stdout)
        _, root, _ = self.page(*logs[:2])
        self.assertNotIn('left out', root.find('header')[0].all_text())

    def test_large_logs_are_binned_and_small(self):
        lines = [start(), site(A, 'x.py:1 (f)')]
        for s in range(1, 20001):
            path = ('recapture', 'fallback', 'fresh')[s % 3]
            lines.append(capture(A, path, s, reason=None if path == 'recapture' else f'r{s % 5}',
                                 us=float(s % 97 + 1)))
            lines.append(inst(A, 'new' if s % 2 else 'update', float(s % 50 + 1), seq=s))
        text, root, _ = self.page(self.write('big.jsonl', lines))
        (lane,) = root.find('section', 'lane')
        self.assertEqual(lane.attrs['data-logged-captures'], '20000')
        self.assertEqual(marks(lane, 'c'), [], 'binned: no single marks')
        groups = [g for g in lane.find('g')]
        self.assertLessEqual(len(groups), 2 * recap_html.MARKS)
        self.assertGreater(len(groups), recap_html.MARKS)
        first = groups[0].children[0].text
        self.assertRegex(first, r'^captures 1-\d+, \d+ logged: ')
        self.assertLess(len(text), 400 * 1024)

    def test_many_lanes_share_the_budget(self):
        lines = [start()]
        sites = [f'{n:016x}' for n in range(1, 41)]
        for sid in sites:
            lines.append(site(sid, None))
            lines += [capture(sid, 'fallback', s, reason=f'r{s % 2}') for s in range(1, 2501)]
        text, root, _ = self.page(self.write('many.jsonl', lines))
        self.assertEqual(len(root.find('section', 'lane')), 40)
        self.assertLess(len(text), 2 * 1024 * 1024)

    def test_stdout_and_unwritable(self):
        log = self.write('a.jsonl', [capture(A, 'fresh')])
        r = recap('report', '--html', '-', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith('<!DOCTYPE html>'))
        r = recap('report', '--html', os.path.join(self.dir, 'no', 'such', 'dir.html'), log)
        self.assertEqual(r.returncode, 1)
        self.assertIn('recap: cannot write', r.stderr)
        r = recap('report', '--html', os.path.join(self.dir, 'x.html'), log,
                  os.path.join(self.dir, 'missing.jsonl'))
        self.assertEqual(r.returncode, 1)
        self.assertIn('recap: cannot read', r.stderr)
        r = recap('report', '--html', 'x.html', '--json', log)
        self.assertEqual(r.returncode, 2)


class StepBars(PageBase):
    """Where a step's time goes: a stacked bar per site whose end event
    counted a period - measured parts, the program's own work (derived),
    what recap removed (estimated) - scaled to the longest."""

    def test_a_bar_per_site_with_a_period(self):
        from test_report import EXAMPLE, step_sums
        log = self.write('s.jsonl', [
            start(), site(A, 'a.py:1 (f)'), site(B, 'b.py:2 (g)'),
            ev('end', totals={}, sites=[
                end_entry(A, 11, 0, step=step_sums(**EXAMPLE)),
                end_entry(B, 11, 0, step=step_sums(**dict(EXAMPLE, period_us=1270.0,
                                                          capture_us=600.0))),
                end_entry('00000000000000cc', 1, 0)])])
        text, root, _ = self.page(log)
        self.assertIn("<h2>Where a step's time goes</h2>", text)
        bars = {g.attrs['data-site']: g for g in root.find('g', 'step')}
        self.assertEqual(set(bars), {A, B}, 'no bar for a site without a period')
        parts = {r.classes()[0]: float(r.attrs['data-us']) for r in bars[A].find('rect')}
        self.assertEqual(parts, {'s-capture': 1880.0, 's-instantiate': 80.0, 's-launch': 30.0,
                                 's-alloc': 210.0, 's-free': 180.0, 's-sync': 10.0,
                                 's-own': 150.0, 's-saved': 98.0})
        titles = {r.classes()[0]: r.find('title')[0].all_text() for r in bars[A].find('rect')}
        self.assertIn('(measured)', titles['s-capture'])
        self.assertIn('(derived: the period less the rest)', titles['s-own'])
        self.assertIn('estimated', titles['s-saved'])
        widths = {k: sum(float(r.attrs['width']) for r in g.find('rect'))
                  for k, g in bars.items()}
        self.assertAlmostEqual(widths[A], recap_html.STEP_BAR[1] - recap_html.STEP_BAR[0],
                               places=0, msg='the longest fills the room')
        self.assertLess(widths[B], widths[A])
        self.assertIn('period 2.54 ms = capture 1.88', ' '.join(root.all_text().split()))

    def test_no_section_without_periods(self):
        log = self.write('s.jsonl', [start(), site(A, 'a.py:1 (f)'), capture(A, 'fresh'),
                                     ev('end', totals={}, sites=[end_entry(A, 1, 0)])])
        text, root, _ = self.page(log)
        self.assertNotIn("Where a step's time goes", text)
        self.assertEqual(root.find('g', 'step'), [])


def standin_run(t, name, iterations, log, extra=None):
    """The scenario program on the stand-in driver under librecap."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('RECAP_', 'STANDIN_', 'SCENARIO_')) and k not in
           ('LD_PRELOAD', 'RANK', 'WORLD_SIZE')}
    env.update(LD_PRELOAD=preload_value(os.environ.get('RECAP_TEST_PRELOAD_PREFIX'),
                                        os.environ['RECAP_LIB']),
               RECAP_LOG=log, STANDIN_DRIVER_VERSION='13000')
    env.update(extra or {})
    p = subprocess.run([os.environ['SCENARIO_BIN'], name, str(iterations)], env=env,
                       capture_output=True, text=True, timeout=300)
    t.assertEqual(p.returncode, 0, p.stderr)
    return log


class RealRun(PageBase):
    def test_threads_run_has_a_lane_per_site_and_its_timeline(self):
        log = standin_run(self, 'threads', 100, os.path.join(self.dir, 'threads.jsonl'))
        with open(log) as f:
            events = [json.loads(line) for line in f]
        timelines = {e['site']: e for e in events if e['event'] == 'timeline'}
        ends = [e for e in events if e['event'] == 'end']
        self.assertEqual(len(ends), 1)
        self.assertEqual(set(timelines), {s['site'] for s in ends[0]['sites']})
        for s in ends[0]['sites']:
            t = timelines[s['site']]
            counted = sum(sum(t.get(k, [])) for k in ('by_recap', 'by_driver', 'fallback',
                                                       'fresh', 'observe'))
            self.assertEqual(counted, s['captures'], 'the timeline counts every capture')
            insts = sum(sum(t.get(k, [])) for k in ('new', 'update', 'delta', 'reuse'))
            self.assertEqual(insts, s['instantiations'])
        _, root, _ = self.page(log)
        lanes = root.find('section', 'lane')
        self.assertEqual(len(lanes), len(ends[0]['sites']))
        logged = {}
        for e in events:
            if e['event'] == 'capture':
                logged[e['site']] = logged.get(e['site'], 0) + 1
        for lane in lanes:
            sid = lane.attrs['data-site']
            want = next(s for s in ends[0]['sites'] if s['site'] == sid)
            self.assertEqual(int(lane.attrs['data-captures']), want['captures'])
            self.assertEqual(len(marks(lane, 'c')), logged[sid])
            self.assertIn('all captures', lane.find('svg')[0].all_text())

    def test_back_off_from_a_real_run(self):
        # New shapes every capture: the site misses 64 times, stops keeping
        # for 64 captures, then tries again.
        log = standin_run(self, 'fresh_shapes', 120, os.path.join(self.dir, 'shapes.jsonl'))
        with open(log) as f:
            reuse = [e for e in map(json.loads, f) if e['event'] == 'reuse']
        stopped = [e for e in reuse if e['state'] == 'stopped']
        self.assertTrue(stopped, reuse)
        self.assertTrue(all(isinstance(e.get('seq'), int) and e['seq'] > 0 for e in reuse), reuse)
        _, root, _ = self.page(log)
        (lane,) = root.find('section', 'lane')
        bands = [r.children[0].text for r in lane.find('rect') if 'backoff' in r.classes()]
        self.assertEqual(len(bands), len(stopped))
        self.assertIn(f'back-off at capture {stopped[0]["seq"]}: keeps nothing and looks for '
                      f'nothing for {stopped[0]["backoff"]} captures', bands[0])

    def test_hundred_thousand_captures(self):
        log = standin_run(self, 'params', 100000, os.path.join(self.dir, 'big.jsonl'))
        text, root, _ = self.page(log)
        self.assertLess(len(text.encode()), 2 * 1024 * 1024)
        (lane,) = root.find('section', 'lane')
        self.assertEqual(lane.attrs['data-captures'], '100000')
        self.assertIn('to a bar', lane.find('p', 'note')[0].all_text())
        windows = [t.text for t in lane.find('title') if re.match(r'captures \d', t.text)]
        self.assertEqual(len(windows), 25, '100000 captures, 4096 a window')


if __name__ == '__main__':
    unittest.main()
