"""docs/benchmarks.md's sandbox table names, for each thing the sandbox isolates, the test that
attacks it: every test it names exists, in the file it names (tests/test_sandbox_boundary.py
unless the row says another)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _rows() -> list[str]:
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    table = text[text.index("## The sandbox"):].split("\n\n")
    return [line for block in table if block.lstrip().startswith("| What") for line in block.splitlines()[2:]]


def test_every_test_the_sandbox_table_names_exists():
    rows = _rows()
    assert len(rows) >= 20
    named = 0
    for row in rows:
        cell = row.rstrip(" |").rsplit("|", 1)[-1]
        where = re.search(r"\((tests/[\w/]+\.py)\)", cell)
        source = (ROOT / (where.group(1) if where else "tests/test_sandbox_boundary.py")).read_text()
        for name in re.findall(r"`(test_\w+)`", cell):
            assert re.search(rf"^def {name}\(", source, re.M), f"{name} is not in {where.group(1) if where else 'tests/test_sandbox_boundary.py'}"
            named += 1
    assert named >= len(rows)
