"""upstream_torch_names.py - a pytest plugin that the upstream lane loads
(`-p upstream_torch_names`) for PyTorch's test files.

Owns: letting a test file of a slightly different PyTorch than the one
installed import.  Before pytest imports a test file, every name the file
imports from torch.testing._internal.* and the installed module lacks is
looked for in the installed torch's other test-helper modules (PyTorch moves
flags such as TEST_CUDAMALLOCASYNC between common_cuda and common_utils) and
set where the file looks for it.  A flag found nowhere (an upper-case
TEST_*/IS_*/PLATFORM_* name) is set to False, so that what it guards is
skipped; any other missing name is left missing and the file fails to
import, as it would have.  The names lent are printed at the end of the run.

Must never change a name the installed torch has, nor anything outside
torch.testing._internal: the plain run and the run under recap load it
alike, so it cannot make their outcomes differ.
"""

import ast
import importlib

INTERNAL = 'torch.testing._internal'
# Where PyTorch has kept the flags and helpers test_cuda.py imports.
LENDERS = ('common_utils', 'common_cuda', 'common_device_type', 'common_dtype')
FLAG_PREFIXES = ('TEST_', 'IS_', 'PLATFORM_SUPPORTS_')

_lent = []        # "module.NAME from lender" or "module.NAME = False"


def _imports_from_internal(path):
    """(module, name) pairs of the file's top-level `from torch.testing._internal.X import ...`."""
    try:
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    pairs = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.startswith(INTERNAL + '.'):
            pairs += [(node.module, alias.name) for alias in node.names if alias.name != '*']
    return pairs


def _lender_of(name, besides):
    for short in LENDERS:
        full = f'{INTERNAL}.{short}'
        if full == besides:
            continue
        try:
            module = importlib.import_module(full)
        except Exception:          # a helper module that does not import here lends nothing
            continue
        if hasattr(module, name):
            return full, getattr(module, name)
    return None, None


def lend_missing_names(path):
    for module_name, name in _imports_from_internal(path):
        try:
            module = importlib.import_module(module_name)
        except Exception:
            continue               # the file's own import then says what is wrong
        if hasattr(module, name):
            continue
        lender, value = _lender_of(name, module_name)
        if lender is not None:
            setattr(module, name, value)
            _lent.append(f'{module_name}.{name} from {lender}')
        elif name.startswith(FLAG_PREFIXES):
            setattr(module, name, False)
            _lent.append(f'{module_name}.{name} = False (not in the installed torch)')


def pytest_collect_file(file_path, parent):
    # Called before the python plugin's Module imports the file.
    if file_path.suffix == '.py' and file_path.name.startswith('test_'):
        lend_missing_names(file_path)
    return None


def pytest_terminal_summary(terminalreporter):
    if _lent:
        terminalreporter.write_line('upstream_torch_names: names the installed torch lacks where '
                                    'the test file imports them: ' + '; '.join(_lent))
