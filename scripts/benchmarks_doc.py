"""Write the catalogue table into docs/benchmarks.md (between its catalogue markers).

    .venv/bin/python scripts/benchmarks_doc.py

The table is ``tracerl tasks list --markdown``; tests/test_catalogue_docs.py fails when the page
and the registry differ.
"""

from __future__ import annotations

from pathlib import Path

from tracerl import tasks
from tracerl.cli.tasks import markdown

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
START, END = "<!-- catalogue:start -->\n", "<!-- catalogue:end -->"


def table() -> str:
    return markdown([tasks.get(name) for name in tasks.names()])


def main() -> None:
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _old, tail = rest.split(END, 1)
    DOC.write_text(head + START + table() + END + tail, encoding="utf-8")
    print(f"wrote {len(tasks.names())} tasks into {DOC}")


if __name__ == "__main__":
    main()
