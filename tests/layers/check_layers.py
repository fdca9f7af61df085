#!/usr/bin/env python3
"""check_layers.py - recap's module dependencies run one way.

  check_layers.py SOURCE_ROOT [GENERATED_DIR...]
  check_layers.py --self-test

Reads the layers of tests/layers/layers.txt and every `#include "shim/..."`
or `"policy/..."` line of shim/ and policy/ (and of the generated sources in
GENERATED_DIR, e.g. the build's shim/), where a module is a .c file and its
.h. Fails, naming each, on a file whose module has no layer, a listed
module with no file, an include that goes up a layer, and a cycle of
includes between modules. Prints one summary line when all is well.
"""
import glob
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:shim|policy)/[A-Za-z0-9_]+)\.h"', re.M)


def read_layers(path):
    order, layer_of, part_of = [], {}, {}
    for number, line in enumerate(open(path), 1):
        words = line.split('#', 1)[0].split()
        if not words:
            continue
        if words[0] == 'part-of':
            if len(words) != 3:
                raise SystemExit(f'{path}:{number}: expected "part-of FILE-MODULE MODULE"')
            part_of[words[1]] = words[2]
            continue
        order.append(words[0])
        for module in words[1:]:
            if module in layer_of:
                raise SystemExit(f'{path}:{number}: {module} listed twice')
            layer_of[module] = words[0]
    return order, layer_of, part_of


def sources(root, generated):
    files = []
    for d in ('shim', 'policy'):
        files += sorted(glob.glob(os.path.join(root, d, '*.[ch]')))
    for g in generated:
        files += sorted(glob.glob(os.path.join(g, '*.[ch]')))
    seen = {}
    for f in files:
        module = os.path.basename(os.path.dirname(f)) + '/' + os.path.basename(f).rsplit('.', 1)[0]
        seen.setdefault(os.path.basename(os.path.dirname(f)) + '/' + os.path.basename(f), (module, f))
    return list(seen.values())


def find_cycle(graph):
    """A list of modules forming a cycle, or None (iterative DFS)."""
    state = {}
    for start in sorted(graph):
        if start in state:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(child) == 1:
                return path[path.index(child):] + [child]
            if child not in state:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None


def check(root, generated, layers_file):
    order, layer_of, part_of = read_layers(layers_file)
    rank = {layer: i for i, layer in enumerate(order)}
    problems = []
    graph = {}
    found = set()
    includes = 0
    name = os.path.relpath(layers_file, root) if layers_file.startswith(root) else layers_file
    for module, path in sources(root, generated):
        module = part_of.get(module, module)
        found.add(module)
        if module not in layer_of:
            problems.append(f'{path}: module {module} has no layer: add it to {name}')
            continue
        graph.setdefault(module, set())
        for target in INCLUDE.findall(open(path, errors='replace').read()):
            target = part_of.get(target, target)
            if target == module:
                continue
            includes += 1
            graph[module].add(target)
            if target not in layer_of:
                continue          # reported with its own file
            if rank[layer_of[target]] < rank[layer_of[module]]:
                problems.append(f'{path}: {module} ({layer_of[module]}) includes {target}.h '
                                f'({layer_of[target]}): an include may not go up a layer')
    for module in sorted(set(layer_of) - found):
        problems.append(f'{name}: {module} is listed but has no file')
    cycle = find_cycle(graph)
    if cycle:
        problems.append('cycle of includes between modules: ' + ' -> '.join(cycle))
    return problems, len(graph), includes, order


def self_test():
    """The checker itself finds an upward include, a cycle and an unlisted
    module in a small made-up tree, and passes a clean one."""
    def tree(files, layers):
        d = tempfile.mkdtemp(prefix='layers-')
        os.makedirs(os.path.join(d, 'shim'))
        os.makedirs(os.path.join(d, 'policy'))
        for path, text in files.items():
            with open(os.path.join(d, path), 'w') as f:
                f.write(text)
        with open(os.path.join(d, 'layers.txt'), 'w') as f:
            f.write(layers)
        return d
    layers = 'top shim/a\nlow shim/b shim/c\n'
    ok = tree({'shim/a.c': '#include "shim/b.h"\n', 'shim/b.c': '#include "shim/c.h"\n',
               'shim/c.h': ''}, layers)
    up = tree({'shim/a.c': '', 'shim/b.c': '#include "shim/a.h"\n', 'shim/c.h': ''}, layers)
    loop = tree({'shim/a.c': '', 'shim/b.c': '#include "shim/c.h"\n',
                 'shim/c.c': '#include "shim/b.h"\n'}, layers)
    extra = tree({'shim/a.c': '', 'shim/b.c': '', 'shim/c.c': '', 'shim/d.c': ''}, layers)
    failures = []
    for d, want in ((ok, None), (up, 'may not go up a layer'),
                    (loop, 'cycle of includes between modules: shim/b -> shim/c -> shim/b'),
                    (extra, 'module shim/d has no layer')):
        problems = check(d, [], os.path.join(d, 'layers.txt'))[0]
        if want is None and problems:
            failures.append(f'clean tree rejected: {problems}')
        elif want is not None and not any(want in p for p in problems):
            failures.append(f'expected "{want}", got {problems}')
    for f in failures:
        print('self-test:', f)
    print('self-test: %s' % ('failed' if failures else 'the checker finds what it must'))
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) < 2:
        print(__doc__)
        return 2
    root = os.path.abspath(argv[1])
    layers_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'layers.txt')
    problems, modules, includes, order = check(root, argv[2:], layers_file)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f'layers: {modules} modules, {includes} includes, all one way '
          f'({" -> ".join(order)})')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
