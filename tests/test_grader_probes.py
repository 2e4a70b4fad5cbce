"""The verdict lives outside the reply (issue 41): every reply of tracerl.tasks.graders.probes
scores exactly 0 through the real code graders (HumanEval, MBPP, a stdin/stdout set, KodCode)
on the fixture rows, while the reference solutions still score 1; and the probes are real:
several of them pass under the old design, where the reply's code ran beside the tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracerl.core.types import Task
from tracerl.tasks.catalogue import benchmarks
from tracerl.tasks.graders import code as code_grader
from tracerl.tasks.graders import wire
from tracerl.tasks.graders.probes import CODE_PROBES, TEXT_PROBES, Probe
from tracerl.tasks.sandbox import Limits, run_python

pytest.importorskip("datasets")

DATA = Path(__file__).parent / "data"
BENCH = {b.name: b for b in benchmarks() if b.domain == "code"}


def _tasks(name: str, role: str = "test", n: int = 3) -> list[Task]:
    return BENCH[name].tasks(role, n, path=DATA)


def _probes(form: str) -> list[Probe]:
    return [p for p in CODE_PROBES if form in p.forms]


def _ids(probes: list[Probe]) -> list[str]:
    return [p.name for p in probes]


@pytest.mark.parametrize("probe", _probes("function"), ids=_ids(_probes("function")))
def test_humaneval_scores_every_probe_zero(probe):
    bench = BENCH["humaneval"]
    for task in _tasks("humaneval"):
        result = bench.grade(task, probe.text(task.data["entry_point"]))
        assert not result.ok and bench.reward(task, probe.text(task.data["entry_point"])) == 0.0, \
            (probe.name, task.id, result.reason)


def test_humaneval_reference_solutions_still_score_one():
    bench = BENCH["humaneval"]
    for task in _tasks("humaneval"):
        assert bench.reward(task, bench.solution(task)) == 1.0, bench.grade(task, bench.solution(task)).reason


@pytest.mark.parametrize("probe", _probes("function"), ids=_ids(_probes("function")))
def test_mbpp_scores_every_probe_zero(probe):
    bench = BENCH["mbpp"]
    task = _tasks("mbpp", n=1)[0]
    found = re.search(r"assert\s+\(?\s*(?:set\()?\s*(\w+)\(", task.data["test_list"][0])
    assert found is not None
    name = found.group(1)
    assert bench.reward(task, bench.solution(task)) == 1.0
    assert bench.reward(task, probe.text(name)) == 0.0, bench.grade(task, probe.text(name)).reason


@pytest.mark.parametrize("probe", _probes("stdin"), ids=_ids(_probes("stdin")))
def test_stdin_sets_score_every_probe_zero(probe):
    bench = BENCH["codecontests"]
    task = _tasks("codecontests", n=1)[0]
    assert bench.reward(task, bench.solution(task)) == 1.0
    assert bench.reward(task, probe.text()) == 0.0, bench.grade(task, probe.text()).reason


@pytest.mark.parametrize("probe", _probes("pytest"), ids=_ids(_probes("pytest")))
def test_kodcode_scores_every_probe_zero(probe):
    bench = BENCH["kodcode"]
    task = {t.data["question_id"]: t for t in _tasks("kodcode", "train", 50)}["Leetcode_9990_I"]
    assert bench.reward(task, bench.solution(task)) == 1.0
    assert bench.reward(task, probe.text("two_sum")) == 0.0, bench.grade(task, probe.text("two_sum")).reason


def _old_program(task: Task, code: str) -> str:
    """The design before issue 41: prompt, reply and tests in one program, one process."""
    return f"{task.data['prompt']}\n{code}\n\n{task.data['test']}\n\ncheck({task.data['entry_point']})\n"


@pytest.mark.parametrize("name", ["equal-to-everything", "lying-int", "tests-from-disk"])
def test_the_probes_beat_the_old_design_where_the_reply_ran_beside_its_tests(name):
    probe = next(p for p in CODE_PROBES if p.name == name)
    task = next(t for t in _tasks("humaneval") if t.data["entry_point"] == "total")
    code = code_grader.extract_code(probe.text("total"))
    assert run_python(_old_program(task, code), Limits(timeout_s=10.0)).ok, name  # it scored 1 before
    assert BENCH["humaneval"].reward(task, probe.text("total")) == 0.0


def test_a_reply_cannot_reach_the_tests_or_their_process():
    task = Task(id="t", data={"prompt": "def look():\n    \"\"\"What can the reply see?\"\"\"\n", "entry_point": "look",
                              "test": "SECRET = 'tracerl-tests-7c1e'\n\ndef check(candidate):\n    assert candidate() == [], candidate()\n"},
                dataset="humaneval")
    seen = '''
import glob, os
def look():
    found = []
    for pattern in ("*", "../*", "/tmp/*", "/tmp/*/*", "/proc/*/cwd/*", "/proc/*/root/tmp/*/*"):
        for path in glob.glob(pattern):
            try:
                with open(path, errors="replace") as f:
                    if "tracerl-tests-" + "7c1e" in f.read():  # not as one literal: its own file holds this
                        found.append(path)
            except OSError:
                pass
    return found
'''
    result = BENCH["humaneval"].grade(task, f"```python\n{seen}```")
    assert result.ok, result.reason  # the tests' text is nowhere the reply can read


def test_only_plain_data_crosses_decoded_with_the_receivers_types():
    value = {"a": [1, 2.5, (3, "x")], 7: {frozenset({1}), b"\x00"}, None: True, "big": 10**5000}
    assert wire.decode(wire.encode(value)) == value
    assert type(wire.decode(wire.encode((1,)))) is tuple and type(wire.decode(wire.encode([1]))) is list

    class Lying(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    for bad in (Lying(1), object(), [1, Lying(2)], {"k": print}, float.__new__(type("F", (float,), {}), 1.0)):
        with pytest.raises(wire.NotPlain):
            wire.encode(bad)
    for forged in ({"x": 1}, {"l": 5}, {"d": [[1]]}, [1, 2], {"i": 5}, {"d": [[{"l": []}, 1]]}):
        with pytest.raises((ValueError, TypeError)):
            wire.decode(forged)


def test_the_suite_is_importable_with_room_for_text_probes():
    assert len({p.name for p in CODE_PROBES}) == len(CODE_PROBES) >= 12
    assert all(isinstance(p, Probe) and p.forms and p.why for p in CODE_PROBES)
    assert isinstance(TEXT_PROBES, list)  # the text domains' probes live beside them (their own tests)


def test_the_replys_process_keeps_the_sandboxs_blocks_and_its_packages():
    task = Task(id="t", data={"prompt": "def f():\n    \"\"\"x\"\"\"\n", "entry_point": "f",
                              "test": "def check(candidate):\n    assert candidate() == ['ok', 'ok', 'ok'], candidate()\n"},
                dataset="humaneval")
    code = '''
import socket, subprocess
def f():
    seen = []
    for attempt in (lambda: socket.create_connection(("127.0.0.1", 9), timeout=1), lambda: subprocess.run(["true"])):
        try:
            attempt()
            seen.append("ran")
        except PermissionError:
            seen.append("ok")
    import pytest  # the interpreter's packages, though its programs start without site
    seen.append("ok" if pytest.__name__ == "pytest" else "no")
    return seen
'''
    result = BENCH["humaneval"].grade(task, f"```python\n{code}```")
    assert result.ok, result.reason
