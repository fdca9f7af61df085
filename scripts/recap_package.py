"""recap - makes CUDA programs that capture a graph every iteration stop
paying for instantiation, without a line of the program changed.

This package is the recap command (`recap run -- python train.py`,
`recap report`, `recap config`, `recap doctor`; also `python -m recap`)
and the library it preloads, librecap.so. It has no Python API: the
library acts on the CUDA driver calls of the program it is preloaded into.
See `recap --help`.
"""

__version__ = '@VERSION@'
