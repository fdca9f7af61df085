#!/usr/bin/env python3
"""test_advice.py - the advice `recap report` gives per site
(scripts/recap_advice.py): each rule on a synthesized log that must
trigger it and on one that must not, every piece naming its figures; the
advice in the table, --json and the HTML page; none where nothing would
help; and the rules on real stand-in runs (C scenarios and a Python
program driving the stand-in through ctypes).

Environment (set by meson): RECAP_SCRIPT, RECAP_LIB, SCENARIO_BIN,
STANDIN_DIR and the stand-in's variables."""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_recap import Base, capture, ev, inst, recap  # noqa: E402
from preload import preload_value  # noqa: E402
from test_report import end_entry, start  # noqa: E402
from test_html import Tree, standin_run  # noqa: E402

A = '00000000000000aa'
TORCH = ['/usr/lib/python3/site-packages/torch/cuda/graphs.py:120 (__enter__)',
         'train.py:40 (step)']
CUPY = ['/usr/lib/python3/site-packages/cupy/cuda/stream.py:88 (begin_capture)',
        'solve.py:12 (run)']


def with_fields(line, **fields):
    e = json.loads(line)
    e.update(fields)
    return json.dumps(e)


class Rules(Base):
    def advice(self, end=None, events=(), python=None, label='step.py:1 (f)', reuse=()):
        """The advice of a one-site log: {rule: Advice as JSON}, and the
        report's text."""
        site = {'site': A, 'frames': ['app+0x10 step+0x4'], 'label': label, 'mode': 'auto'}
        if python:
            site['python'] = {'version': '3.11', 'gil': 'held', 'frames': python}
        lines = [start(), ev('site', **site), *events, *reuse]
        if end is not None:
            lines.append(ev('end', sites=[end], totals={}))
        log = self.write('a.jsonl', lines)
        r = recap('report', '--json', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        (row,) = json.loads(r.stdout)['sites']
        text = recap('report', log).stdout
        flat = ' '.join(text.split())
        for a in row['advice']:
            self.assertIn(' '.join(a['text'].split()), flat, 'the table gives it too')
        return {a['rule']: a for a in row['advice']}, text

    def repeat_events(self, n=20, nodes=10, changed=0, **kw):
        """A fresh capture, then n - 1 recaptures of `nodes` nodes."""
        out = [capture(A, 'fresh', 1, reason='first capture at this site')]
        for s in range(2, n + 1):
            out.append(with_fields(capture(A, 'recapture', s, eligible=changed),
                                   nodes=nodes, **kw))
        return out

    # -- capture_once
    def test_capture_once(self):
        end = end_entry(A, 100, 0, changed=0, eligible=0, capture_us=5000.0,
                        inst_new_us=300.0, reuse_us=297.0)
        got, text = self.advice(end, self.repeat_events())
        a = got['capture_once']
        self.assertEqual(a['figures']['repeat_captures'], 99)
        self.assertAlmostEqual(a['figures']['capture_us'], 50.0)
        self.assertAlmostEqual(a['figures']['instantiation_us'], 5.97)
        self.assertIn('All 99 repeat captures changed no node', a['text'])
        self.assertIn('save about 56.0 µs per iteration (capture 50.0 µs, instantiation 6.0 µs '
                      'on average)', a['text'])
        self.assertIn('cudaGraphLaunch', a['text'], 'a C program: the CUDA calls')
        self.assertIn('What the program could change', text)
        got, _ = self.advice(end, self.repeat_events(), python=TORCH)
        self.assertIn('torch.cuda.CUDAGraph', got['capture_once']['text'])
        self.assertIn('g.replay()', got['capture_once']['text'])
        got, _ = self.advice(end, self.repeat_events(), python=CUPY)
        self.assertIn('graph.launch()', got['capture_once']['text'])

    def test_capture_once_not_when_nodes_changed_or_few_or_fell_back(self):
        for end in (end_entry(A, 100, 0, changed=40, eligible=40),
                    end_entry(A, 100, 2, changed=0, eligible=0),
                    end_entry(A, 6, 0, changed=0, eligible=0)):
            got, _ = self.advice(end, self.repeat_events())
            self.assertNotIn('capture_once', got, end)

    # -- static_inputs
    def test_static_inputs(self):
        end = end_entry(A, 100, 0, changed=198, eligible=198, nodes=4000)
        events = self.repeat_events(nodes=40, changed=2)
        events.append(with_fields(capture(A, 'recapture', 30, eligible=5), nodes=40))
        got, _ = self.advice(end, events, python=TORCH)
        a = got['static_inputs']
        self.assertIn('The 99 repeat captures changed 2.0 of 40 nodes each on average, at most 5 '
                      'in one logged capture', a['text'])
        self.assertIn('static tensors', a['text'])
        self.assertNotIn('capture_once', got)

    def test_static_inputs_not_when_many_change_or_many_fall_back(self):
        for end in (end_entry(A, 100, 0, changed=99 * 15, eligible=99 * 15, nodes=4000),
                    end_entry(A, 100, 30, changed=140, eligible=140, nodes=4000)):
            got, _ = self.advice(end, self.repeat_events(nodes=40))
            self.assertNotIn('static_inputs', got, end)

    # -- static_inputs where the log says every capture had one shape
    # (shapes_seen, the end event's), however many nodes changed
    STEP = {'periods': 99, 'period_us': 99 * 2540.0, 'capture': 99, 'capture_us': 99 * 1880.0,
            'instantiate': 99, 'instantiate_us': 99 * 80.0, 'launch': 99, 'launch_us': 99 * 30.0,
            'alloc': 198, 'alloc_us': 99 * 210.0, 'free': 198, 'free_us': 99 * 180.0,
            'host_alloc': 0, 'host_alloc_us': 0, 'host_free': 0, 'host_free_us': 0,
            'sync': 99, 'sync_us': 99 * 10.0}

    def one_shape_end(self, nodes, changed_each, **extra):
        fields = dict(changed=99 * changed_each, eligible=99 * changed_each, nodes=100 * nodes,
                      shapes_seen=1, shapes_more=False, shapes_counted=100, step=self.STEP)
        fields.update(extra)
        return end_entry(A, 100, 0, **fields)

    def test_one_shape_few_nodes_changed_like_torch_loop(self):
        # 3 of 10 nodes changed per capture: more than the handful the
        # older rule took (a quarter of the nodes), the same graph all the same.
        got, _ = self.advice(self.one_shape_end(10, 3), self.repeat_events(nodes=10, changed=3),
                             python=TORCH)
        a = got['static_inputs']
        self.assertIn('Every one of the 100 captures whose graph recap knew here had one shape '
                      '(one signature: the same topology and kernels each time); its 99 repeat '
                      'captures changed 3.0 of 10 nodes each on average', a['text'])
        self.assertIn('static tensors', a['text'])
        self.assertIn('g.replay()', a['text'])
        self.assertIn('Measured over 99 periods (capture begin to capture begin): a period took '
                      '2,540.0 µs, of which capturing 1,880.0 µs and instantiating 80.0 µs; one '
                      'launch '
                      'of its graph took 30.0 µs.', a['text'])
        self.assertIn('replace the 1,960.0 µs that capturing and instantiating take each period '
                      'with one launch', a['text'])
        self.assertEqual(a['figures']['shapes_seen'], 1)
        self.assertAlmostEqual(a['figures']['period_us'], 2540.0)
        self.assertAlmostEqual(a['figures']['launch_us'], 30.0)
        self.assertAlmostEqual(a['figures']['changed_per_capture'], 3.0)

    def test_one_shape_every_node_changed_like_resnet(self):
        # Every node's pointers change (a framework's fresh allocations).
        got, _ = self.advice(self.one_shape_end(60, 60),
                             self.repeat_events(nodes=60, changed=60))
        a = got['static_inputs']
        self.assertIn('changed 60.0 of 60 nodes each on average', a['text'])
        self.assertIn('cudaGraphExecKernelNodeSetParams', a['text'], 'a C program')

    def test_one_shape_many_nodes_changed_like_decode(self):
        # A decode step per capture, 20 to 200 of 400 nodes changed each.
        events = self.repeat_events(nodes=400, changed=20)
        events.append(with_fields(capture(A, 'recapture', 50, eligible=200), nodes=400))
        got, _ = self.advice(self.one_shape_end(400, 110), events, python=TORCH)
        a = got['static_inputs']
        self.assertIn('changed 110.0 of 400 nodes each on average, at most 200 in one logged '
                      'capture', a['text'])

    def test_one_shape_without_recaptures_or_step(self):
        # Executable reuse only: every capture a driver capture, no change
        # counted; no step accounting in the log: the saving from the counters.
        end = end_entry(A, 100, 0, recaptured=0, by_recap=0, fresh=100, shapes_seen=1,
                        shapes_more=False, shapes_counted=100)
        events = [capture(A, 'fresh', s, reason='driver 13000 has no recapture API') for s in
                  range(1, 30)]
        got, _ = self.advice(end, events)
        a = got['static_inputs']
        self.assertIn('Every one of the 100 captures whose graph recap knew here had one shape '
                      '(one signature: the same topology and kernels each time). Capture it once',
                      a['text'])
        self.assertIn('That would save up to', a['text'])
        self.assertNotIn('Measured over', a['text'])

    def test_one_shape_rule_not_where_shapes_vary_or_are_few_or_unchanged(self):
        cases = (
            # two kinds of graph, though few nodes changed
            self.one_shape_end(10, 2, shapes_seen=2),
            # more kinds than the writer tells apart
            self.one_shape_end(10, 20, shapes_seen=32, shapes_more=True),
            # too few captures whose graph recap knew
            self.one_shape_end(10, 5, shapes_counted=5),
        )
        for end in cases:
            got, _ = self.advice(end, self.repeat_events(nodes=10, changed=2))
            self.assertNotIn('static_inputs', got, end)
        # No node changed: capture_once says it, with the measured step.
        got, _ = self.advice(self.one_shape_end(10, 0), self.repeat_events(nodes=10))
        self.assertNotIn('static_inputs', got)
        self.assertIn('Measured over 99 periods', got['capture_once']['text'])
        self.assertAlmostEqual(got['capture_once']['figures']['launch_us'], 30.0)

    # -- graph_per_shape
    def test_graph_per_shape_from_node_counts(self):
        events = [with_fields(capture(A, 'recapture', s), nodes=10 + 2 * (s % 4))
                  for s in range(1, 41)]
        got, _ = self.advice(end_entry(A, 400, 0), events, python=TORCH)
        a = got['graph_per_shape']
        self.assertEqual(a['figures']['shapes'], 4)
        self.assertIn('4 shapes cycle through this site (4 node counts recur among its logged '
                      'captures (10, 12, 14, 16)) over 400 captures', a['text'])
        self.assertIn('torch.compile(mode="reduce-overhead")', a['text'])

    def test_graph_per_shape_in_c(self):
        events = [with_fields(capture(A, 'recapture', s), nodes=10 + s % 3) for s in range(1, 30)]
        got, _ = self.advice(end_entry(A, 200, 0), events)
        self.assertEqual(got['graph_per_shape']['figures']['shapes'], 3)
        self.assertIn('map from shape to executable graph', got['graph_per_shape']['text'])

    def test_kept_graphs_are_not_shapes(self):
        # Three kept graphs matched against, one node count: the log shows
        # one shape (a program may hold one graph while capturing the next).
        events = [with_fields(capture(A, 'recapture', s), candidates=3) for s in range(1, 30)]
        got, _ = self.advice(end_entry(A, 200, 0), events)
        self.assertNotIn('graph_per_shape', got)

    def test_graph_per_shape_not_for_one_shape_or_shapes_that_never_recur(self):
        one = [with_fields(capture(A, 'recapture', s), nodes=10) for s in range(1, 41)]
        each = [with_fields(capture(A, 'fresh', s, reason='no released graph of the predicted '
                                    'shape'), nodes=10 + s) for s in range(1, 41)]
        for events in (one, each):
            got, _ = self.advice(end_entry(A, 40, 0), events)
            self.assertNotIn('graph_per_shape', got)

    # -- memory_nodes
    def test_memory_nodes(self):
        events = [capture(A, 'fresh', 1, reason='first capture at this site')] + [
            capture(A, 'fresh', s, reason='its graphs hold memory allocation nodes')
            for s in range(2, 6)]
        end = end_entry(A, 50, 0, recaptured=0, by_recap=0, fresh=50, new=50, update=0,
                        reused=0, inst_new_us=1000.0, capture_us=2500.0)
        got, _ = self.advice(end, events)
        a = got['memory_nodes']
        self.assertIn('"its graphs hold memory allocation nodes" (4 logged captures say so; '
                      '50 of its 50 captures were plain)', a['text'])
        self.assertIn('Allocate outside the capture (or with the graph\'s memory pool)',
                      a['text'])
        self.assertIn('each capture here took 50.0 µs and each new instantiation 20.0 µs',
                      a['text'])
        # Counted by the end event: every capture, not the logged ones.
        end['fresh_reasons'] = {'first capture at this site': 1,
                                'its graphs hold memory allocation nodes': 49}
        got, _ = self.advice(end, events)
        self.assertIn('"its graphs hold memory allocation nodes" (49 captures say so; '
                      '50 of its 50 captures were plain)', got['memory_nodes']['text'])

    def test_memory_nodes_not_without_the_reason(self):
        events = [capture(A, 'fresh', s, reason='no released graph of the predicted shape')
                  for s in range(1, 6)]
        got, _ = self.advice(end_entry(A, 50, 0), events)
        self.assertNotIn('memory_nodes', got)

    # -- conditional_nodes
    def test_conditional_nodes(self):
        events = [capture(A, 'fresh', s, reason='its graphs hold conditional nodes')
                  for s in range(2, 12)]
        got, _ = self.advice(end_entry(A, 40, 0, fresh=40, recaptured=0), events)
        a = got['conditional_nodes']
        self.assertIn('(10 logged captures say so)', a['text'])
        self.assertIn('captured them 40 times', a['text'])
        self.assertIn('cudaGraphSetConditional', a['text'])
        got, _ = self.advice(end_entry(A, 1, 0, fresh=1, recaptured=0), events[:1])
        self.assertNotIn('conditional_nodes', got, 'captured once: nothing to change')

    # -- backed_off
    def test_backed_off_by_misses(self):
        reuse = [ev('reuse', site=A, state='stopped', seq=65, backoff=64, hits=0, misses=60,
                    reason='60 misses against 0 hits and 4 failures in the last 64 looks')]
        got, _ = self.advice(end_entry(A, 200, 0, backoffs=1, fresh=130), reuse=reuse)
        a = got['backed_off']
        self.assertIn('stopped keeping graphs here 1 time(s) (the back-off), most often '
                      'because 60 misses against 0 hits and 4 failures in the last 64 looks; '
                      '130 of 200 captures were plain', a['text'])
        self.assertIn('pad or bucket', a['text'])
        # Failures outweighing the misses: not a matter of shapes.
        reuse = [ev('reuse', site=A, state='stopped', seq=65, backoff=64, hits=0, misses=4,
                    reason='4 misses against 0 hits and 60 failures in the last 64 looks')]
        events = [capture(A, 'fallback', s, reason='streams differ') for s in range(2, 8)]
        got, _ = self.advice(end_entry(A, 200, 60, backoffs=1), events, reuse=reuse)
        self.assertNotIn('pad or bucket', got['backed_off']['text'])
        self.assertIn('"streams differ"', got['backed_off']['text'])

    def test_backed_off_by_failures_names_the_call(self):
        reuse = [ev('reuse', site=A, state='stopped', seq=9, backoff=64, hits=2, misses=3,
                    reason='3 recaptures or updates failed in a row')]
        events = [with_fields(capture(A, 'fallback', s, reason='cuLaunchKernel changed the '
                                      'function or the launch attributes'),
                              switch_call='cuLaunchKernel')
                  for s in range(2, 6)]
        got, _ = self.advice(end_entry(A, 100, 4, backoffs=1), events, reuse=reuse)
        a = got['backed_off']
        self.assertIn('"cuLaunchKernel changed the function or the launch attributes" (4x, '
                      'switched to a driver capture at cuLaunchKernel)', a['text'])
        self.assertNotIn('falls_back', got, 'the back-off says it')

    def test_backed_off_not_without_a_back_off(self):
        got, _ = self.advice(end_entry(A, 100, 0, backoffs=0), self.repeat_events(changed=50))
        self.assertNotIn('backed_off', got)

    # -- falls_back
    def test_falls_back(self):
        events = [with_fields(capture(A, 'fallback', s, reason='kernel function differs'),
                              switch_call='cuLaunchKernel') for s in range(2, 22)]
        got, _ = self.advice(end_entry(A, 100, 20, fallback_reasons={
            'kernel function differs': 20}), events)
        a = got['falls_back']
        self.assertIn('20 of the 99 captures recap tried to repeat fell back (20%), most often: '
                      '"kernel function differs" (20x, switched to a driver capture at '
                      'cuLaunchKernel)', a['text'])
        self.assertFalse(a['figures']['sampled'])

    def test_falls_back_sampled_says_so(self):
        events = [capture(A, 'fallback', s, reason='streams differ') for s in range(2, 6)]
        got, _ = self.advice(end_entry(A, 1000, 300), events)
        self.assertIn('(4x of those logged)', got['falls_back']['text'])
        self.assertTrue(got['falls_back']['figures']['sampled'])

    def test_falls_back_not_when_rare(self):
        events = [capture(A, 'fallback', s, reason='streams differ') for s in (2, 3)]
        got, _ = self.advice(end_entry(A, 100, 2), events)
        self.assertNotIn('falls_back', got)

    # -- all rules
    def test_nothing_to_say(self):
        got, text = self.advice(end_entry(A, 1, 0), [capture(A, 'fresh', 1)])
        self.assertEqual(got, {})
        self.assertNotIn('What the program could change', text)
        # Many nodes change every time, nothing falls back: recap does what
        # can be done.
        got, _ = self.advice(end_entry(A, 100, 0, changed=99 * 9, eligible=99 * 9),
                             self.repeat_events())
        self.assertEqual(got, {})

    def test_at_most_three(self):
        # Four rules apply (shapes, memory nodes, conditional nodes, the
        # back-off): the first three in RULES' order are given.
        events = [capture(A, 'fresh', s, reason='its graphs hold memory allocation nodes')
                  for s in range(2, 5)]
        events += [capture(A, 'fresh', s, reason='its graphs hold conditional nodes')
                   for s in range(5, 8)]
        events += [with_fields(capture(A, 'fallback', s, reason='x'), nodes=10 + 2 * (s % 2))
                   for s in range(8, 40)]
        reuse = [ev('reuse', site=A, state='stopped', seq=9, backoff=64, hits=0, misses=3,
                    reason='3 recaptures or updates failed in a row')]
        got, _ = self.advice(end_entry(A, 400, 32, backoffs=1), events, reuse=reuse)
        self.assertEqual(list(got), ['graph_per_shape', 'memory_nodes', 'conditional_nodes'])


class Output(Base):
    def test_html_lane_shows_the_advice(self):
        events = [capture(A, 'fresh', 1)] + [capture(A, 'recapture', s) for s in range(2, 30)]
        log = self.write('a.jsonl', [start(), *events,
                                     ev('end', sites=[end_entry(A, 29, 0, changed=0, eligible=0)],
                                        totals={})])
        page = os.path.join(self.dir, 'a.html')
        self.assertEqual(recap('report', '--html', page, log).returncode, 0)
        with open(page, encoding='utf-8') as f:
            root = Tree(f.read()).root
        (lane,) = root.find('section', 'lane')
        (advice,) = lane.find('p', 'advice')
        self.assertIn('All 28 repeat captures changed no node', advice.all_text())


class RealRuns(Base):
    """The rules on the stand-in: what each scenario must (and must not)
    make them say."""

    def rules(self, name, iterations):
        log = standin_run(self, name, iterations, os.path.join(self.dir, f'{name}.jsonl'))
        data = json.loads(recap('report', '--json', log).stdout)
        return {row['site']: {a['rule']: a for a in row['advice']} for row in data['sites']}

    def test_conditional_nodes(self):
        (got,) = self.rules('conditional', 30).values()
        self.assertIn('conditional_nodes', got)

    def test_memory_allocation_nodes(self):
        (got,) = self.rules('alloc_nodes', 30).values()
        self.assertIn('memory_nodes', got)

    def test_shapes_that_never_repeat_back_off(self):
        (got,) = self.rules('fresh_shapes', 120).values()
        self.assertIn('pad or bucket', got['backed_off']['text'])
        self.assertNotIn('graph_per_shape', got)

    def test_alternating_shapes(self):
        (got,) = self.rules('alternate', 60).values()
        self.assertEqual(got['graph_per_shape']['figures']['shapes'], 2)
        self.assertNotIn('static_inputs', got, 'two shapes: not one graph to replay')

    def test_every_node_changes_one_shape_replay(self):
        # params: five of six nodes change every iteration, nothing falls
        # back, one signature every time: the same graph with new
        # parameters, to capture once and replay (the end event's step
        # accounting gives the period and one launch).
        (got,) = self.rules('params', 60).values()
        self.assertEqual(list(got), ['static_inputs'])
        a = got['static_inputs']
        self.assertIn('Every one of the 60 captures whose graph recap knew here had one shape',
                      a['text'])
        self.assertIn('changed 5.0 of 6 nodes each on average', a['text'])
        self.assertIn('Measured over 59 periods', a['text'])
        self.assertEqual(a['figures']['periods'], 59)
        self.assertGreater(a['figures']['launch_us'], 0)

    def test_python_program_capturing_the_same_graph(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, 'python',
                              'ctypes_sites.py')
        log = os.path.join(self.dir, 'py.jsonl')
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(('RECAP_', 'STANDIN_')) and k != 'LD_PRELOAD'}
        env.update(LD_PRELOAD=preload_value(os.environ.get('RECAP_TEST_PRELOAD_PREFIX'),
                                            os.environ['RECAP_LIB']),
                   RECAP_LOG=log, STANDIN_DRIVER_VERSION='13000',
                   # CPython leaves its own objects at exit: not recap's leaks.
                   ASAN_OPTIONS='detect_leaks=0')
        p = subprocess.run([sys.executable, script,
                            os.path.join(os.environ['STANDIN_DIR'], 'libcuda.so.1'), 'cdll',
                            '30'], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        data = json.loads(recap('report', '--json', log).stdout)
        self.assertEqual(len(data['sites']), 5)
        for row in data['sites']:
            rules = [a['rule'] for a in row['advice']]
            self.assertEqual(rules, ['capture_once'], row['label'])
            self.assertIn('All 29 repeat captures changed no node', row['advice'][0]['text'])
            self.assertIn('ctypes_sites.py', row['label'])


if __name__ == '__main__':
    unittest.main()
