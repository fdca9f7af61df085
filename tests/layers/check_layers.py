#!/usr/bin/env python3
"""check_layers.py - recap's module dependencies run one way.

  check_layers.py SOURCE_ROOT [GENERATED_DIR...]
  check_layers.py --self-test

Reads the layers of tests/layers/layers.txt and the sources of shim/ and
policy/, their subfolders included (and the generated sources in
GENERATED_DIR, e.g. the build's shim/), where a module is a .c file and its
.h. Two graphs between modules are checked:

  includes   every `#include "shim/..."` or `"policy/..."` line;
  functions  every use of a function another C file defines (a call, or
             its name taken as a pointer) in a function body, an
             initializer or a macro's body. A C file defines its functions
             that are not static; a header, its static inline ones, for
             the module it is part of. Here a C file is a node of its own
             even where layers.txt makes it part of another module. An
             argument a macro pastes into a name (DRV_REAL(cuGraphDestroy),
             a->sym.f) is a name, not a use.

Fails, naming each, on a file whose module has no layer, a listed module
with no file, a shim module outside its layer's folder (shim/LAYER/), an
include or a use that goes up a layer, and a cycle in either graph: no two
C files may use each other's functions, directly or round a longer circle.
Prints one summary line when all is well.
"""
import glob
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:shim|policy)/[A-Za-z0-9_/]+)\.h"', re.M)
KEYWORDS = frozenset('if for while switch return sizeof do else case goto typeof __typeof__ '
                     '__attribute__ defined _Static_assert _Alignof alignof'.split())
TOKEN = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|\\\n|\n|##'
                   r'|->|[A-Za-z_]\w*|\S', re.S)
NAME = re.compile(r'[A-Za-z_]')


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
    """(module, path) of every source: a module is named by its path under
    the root, without the extension (shim/repeat/capture/recorder); a generated
    file, by the path its folder has in the build (GENERATED_DIR's name
    relative to the build's root is not known: the folder's trailing
    shim/... part is used)."""
    seen = {}
    for d in ('shim', 'policy'):
        for f in sorted(glob.glob(os.path.join(root, d, '**', '*.[ch]'), recursive=True)):
            rel = os.path.relpath(f, root)
            seen.setdefault(rel, (rel.rsplit('.', 1)[0], f))
    for g in generated:
        parts = os.path.abspath(g).split(os.sep)
        top = max((i for i, p in enumerate(parts) if p in ('shim', 'policy')), default=None)
        if top is None:
            raise SystemExit(f'{g}: expected a build folder under shim/ or policy/')
        for f in sorted(glob.glob(os.path.join(g, '*.[ch]'))):
            rel = '/'.join(parts[top:] + [os.path.basename(f)])
            seen.setdefault(rel, (rel.rsplit('.', 1)[0], f))
    return list(seen.values())


def lex(text):
    """The code's tokens (no comments, strings or preprocessor lines), and
    each #define as (name, parameters or None, body tokens)."""
    code, defines, line = [], [], None
    for m in TOKEN.finditer(text):
        t = m.group()
        if t.startswith(('/*', '//')) or t == '\\\n':
            continue
        if t == '\n':
            if line is not None and len(line) > 1 and line[0] == 'define':
                name, rest, params = line[1], line[2:], None
                if rest and rest[0] == '(' and ')' in rest:
                    end = rest.index(')')
                    params = [p for p in rest[1:end] if NAME.match(p)]
                    rest = rest[end + 1:]
                defines.append((name, params, rest))
            line = None
            continue
        if line is not None:
            line.append(t)
        elif t == '#' and (not code or m.start() == 0 or text[text.rfind('\n', 0, m.start()) + 1:
                                                                m.start()].strip() == ''):
            line = []
        else:
            code.append(t)
    return code, defines


def pasted_arguments(defines):
    """Function-like macros whose arguments become names (pasted with ##,
    made a string with #, or a member after . or ->): macro -> positions."""
    out = {}
    for name, params, body in defines:
        for i, p in enumerate(params or ()):
            uses = [k for k, t in enumerate(body) if t == p]
            if uses and all((k and body[k - 1] in ('##', '#', '.', '->')) or
                            (k + 1 < len(body) and body[k + 1] == '##') for k in uses):
                out.setdefault(name, set()).add(i)
    return out


def closing(code, i):
    """The index of the parenthesis closing the one at code[i]."""
    depth = 0
    for k in range(i, len(code)):
        if code[k] == '(':
            depth += 1
        elif code[k] == ')':
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def functions_of(text, pasted):
    """The functions a file defines ({name: whether static and not
    inline}) and the names it uses."""
    code, defines = lex(text)
    uses = set()
    for _, params, body in defines:
        uses.update(t for t in body
                    if NAME.match(t) and t not in KEYWORDS and t not in (params or ()))
    names_only = set()
    for i, t in enumerate(code):
        if t in pasted and i + 1 < len(code) and code[i + 1] == '(':
            depth, arg = 0, 0
            for k in range(i + 1, closing(code, i + 1) + 1):
                if code[k] == '(':
                    depth += 1
                elif code[k] == ')':
                    depth -= 1
                elif code[k] == ',' and depth == 1:
                    arg += 1
                elif depth == 1 and arg in pasted[t]:
                    names_only.add(k)
    # Braces open a body: a function's or an initializer's, whose names are
    # uses, or a struct's, union's or enum's, whose names are members.
    defined, depth, members = {}, 0, []
    for i, t in enumerate(code):
        if t == '{':
            depth += 1
            tag = code[i - 2:i] if i >= 2 else code[:i]
            members.append(bool(members and members[-1]) or
                           any(w in ('struct', 'union', 'enum') for w in tag))
        elif t == '}':
            depth -= 1
            if members:
                members.pop()
        elif members and members[-1]:
            continue
        elif not NAME.match(t) or t in KEYWORDS or i in names_only:
            continue
        elif i and code[i - 1] in ('.', '->'):
            continue
        elif depth > 0 or (i and code[i - 1] in ('=', ',', '&')):
            uses.add(t)
        elif i + 1 < len(code) and code[i + 1] == '(':
            k = closing(code, i + 1)
            if k + 1 < len(code) and code[k + 1] == '{':
                j = i - 1
                while j >= 0 and code[j] not in (';', '}', '{'):
                    j -= 1
                head = code[j + 1:i]
                defined[t] = 'static' in head and 'inline' not in head
    return defined, uses


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
    for module in sorted(found & set(layer_of)):
        parts = module.split('/')
        if parts[0] == 'shim' and (len(parts) != 3 or parts[1] != layer_of[module]):
            problems.append(f'{name}: {module} is of layer {layer_of[module]}: its files belong '
                            f'in shim/{layer_of[module]}/')
    for module in sorted(set(layer_of) - found):
        problems.append(f'{name}: {module} is listed but has no file')
    cycle = find_cycle(graph)
    if cycle:
        problems.append('cycle of includes between modules: ' + ' -> '.join(cycle))
    uses = check_functions(root, generated, layer_of, part_of, rank, problems)
    return problems, len(graph), includes, uses, order


def check_functions(root, generated, layer_of, part_of, rank, problems):
    """The function graph: who uses whose functions. Returns how many
    (module, module) pairs it has."""
    # A C file is a node of its own even where it is part of another
    # module: no two C files may use each other's functions in a circle.
    texts = [(m if path.endswith('.c') else part_of.get(m, m), path,
              open(path, errors='replace').read()) for m, path in sources(root, generated)]
    layer_of = dict(layer_of)
    for part, whole in part_of.items():
        if whole in layer_of:
            layer_of.setdefault(part, layer_of[whole])
    pasted = {}
    for _, _, text in texts:
        pasted.update(pasted_arguments(lex(text)[1]))
    owner, scanned = {}, []
    for module, path, text in texts:
        defined, used = functions_of(text, pasted)
        scanned.append((module, path, defined, used))
        for fn, static in defined.items():
            if not static:
                owner.setdefault(fn, module)
    graph, why = {}, {}
    for module, path, defined, used in scanned:
        graph.setdefault(module, set())
        for fn in sorted(used):
            target = owner.get(fn)
            if target is None or target == module or fn in defined:
                continue
            graph[module].add(target)
            why.setdefault((module, target), (path, fn))
            if module in layer_of and target in layer_of and \
                    rank[layer_of[target]] < rank[layer_of[module]] and \
                    (module, target, 'up') not in why:
                why[(module, target, 'up')] = fn
                problems.append(f'{path}: {module} ({layer_of[module]}) uses {fn}() of {target} '
                                f'({layer_of[target]}): a use may not go up a layer')
    cycle = find_cycle(graph)
    if cycle:
        steps = []
        for a, b in zip(cycle, cycle[1:]):
            path, fn = why[(a, b)]
            steps.append(f'{a} uses {fn}() of {b}')
        problems.append('cycle of function uses between modules: ' + '; '.join(steps))
    return sum(len(v) for v in graph.values())


def self_test():
    """The checker itself finds an upward include or use, a cycle of either,
    an unlisted or misplaced module in a small made-up tree, and passes a
    clean one."""
    def tree(files, layers):
        d = tempfile.mkdtemp(prefix='layers-')
        os.makedirs(os.path.join(d, 'shim'))
        os.makedirs(os.path.join(d, 'policy'))
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
            with open(os.path.join(d, path), 'w') as f:
                f.write(text)
        with open(os.path.join(d, 'layers.txt'), 'w') as f:
            f.write(layers)
        return d
    layers = 'top shim/top/a\nlow shim/low/b shim/low/c\n'
    ok = tree({'shim/top/a.c': '#include "shim/low/b.h"\nvoid a(void)\n{\n    b();\n}\n',
               'shim/low/b.c': '#include "shim/low/c.h"\n#define REAL(s) real_##s\n'
                           'void b(void)\n{\n    c(); REAL(a)(); x->a(); y.a = 1;\n}\n',
               'shim/low/c.h': 'struct s {\n    int (*a)(void);\n};\n'
                           'static inline void c(void)\n{\n    /* a() */ puts("a()");\n}\n'},
              layers)
    a, b, c = 'shim/top/a', 'shim/low/b', 'shim/low/c'
    up = tree({a + '.c': '', b + '.c': '#include "shim/top/a.h"\n', c + '.h': ''}, layers)
    loop = tree({a + '.c': '', b + '.c': '#include "shim/low/c.h"\n',
                 c + '.c': '#include "shim/low/b.h"\n'}, layers)
    extra = tree({a + '.c': '', b + '.c': '', c + '.c': '', 'shim/low/d.c': ''}, layers)
    # What includes miss: b and c call each other's functions through a
    # header of c's that declares both (as capture_internal.h did).
    calls = tree({a + '.c': '',
                  b + '.c': '#include "shim/low/c.h"\nvoid b_serve(void)\n{\n    c_back();\n}\n',
                  c + '.h': 'void b_serve(void);\nvoid c_back(void);\n',
                  c + '.c': '#include "shim/low/c.h"\nvoid c_back(void)\n{\n}\n'
                            'static void c_run(void)\n{\n    b_serve();\n}\n'}, layers)
    up_call = tree({a + '.c': 'void a_top(void)\n{\n}\n',
                    b + '.c': 'static int (*f)(void) = a_top;\n', c + '.h': ''}, layers)
    # A shim module outside its layer's folder.
    misplaced = tree({a + '.c': '', b + '.c': '', c + '.h': '', 'shim/top/e.c': ''},
                     layers.replace('shim/low/c\n', 'shim/low/c shim/top/e\n'))
    # Two C files of one module (part-of) are still two files.
    parts = tree({a + '.c': '', c + '.h': '',
                  b + '.c': 'void b_serve(void)\n{\n    b_part_back();\n}\n',
                  b + '_part.c': 'void b_part_back(void)\n{\n}\nstatic void run(void)\n{\n'
                                 '    b_serve();\n}\n'},
                 layers + 'part-of shim/low/b_part shim/low/b\n')
    failures = []
    for d, want in ((ok, None), (up, 'may not go up a layer'),
                    (loop, 'cycle of includes between modules: '
                           'shim/low/b -> shim/low/c -> shim/low/b'),
                    (extra, 'module shim/low/d has no layer'),
                    (calls, 'cycle of function uses between modules: shim/low/b uses c_back() of '
                            'shim/low/c; shim/low/c uses b_serve() of shim/low/b'),
                    (up_call, 'shim/low/b (low) uses a_top() of shim/top/a (top): '
                              'a use may not go up'),
                    (misplaced, 'shim/top/e is of layer low: its files belong in shim/low/'),
                    (parts, 'cycle of function uses between modules: shim/low/b uses '
                            'b_part_back() of shim/low/b_part; shim/low/b_part uses b_serve() '
                            'of shim/low/b')):
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
    problems, modules, includes, uses, order = check(root, argv[2:], layers_file)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f'layers: {modules} modules, {includes} includes and {uses} uses of functions between '
          f'them, all one way ({" -> ".join(order)})')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
