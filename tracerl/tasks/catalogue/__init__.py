"""The benchmark catalogue: real datasets by domain, each a registered task (see :mod:`tracerl.tasks`).

One module per domain, each with a ``BENCHMARKS`` tuple of :class:`~tracerl.tasks.benchmarks.
Benchmark` classes; ``schemas/`` holds what each dataset declares about its columns
(:mod:`.schema`). ``docs/benchmarks.md`` is the table of them all, and how to add one.
"""

from __future__ import annotations

from ..benchmarks import Benchmark
from . import choice, code, code_io, finance, instructions, math, math_train, qa, tools

MODULES = (math, math_train, code, code_io, finance, qa, choice, tools, instructions)


def benchmarks() -> list[Benchmark]:
    """One instance of every catalogue benchmark, domain by domain."""
    return [cls() for module in MODULES for cls in module.BENCHMARKS]
