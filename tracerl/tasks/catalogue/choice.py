"""(being written)"""

from __future__ import annotations

from ..benchmarks import Benchmark

BENCHMARKS: tuple[type[Benchmark], ...] = ()
