"""The code sandbox: what it kills, what it blocks, and that the caller survives all of it."""

from __future__ import annotations

import os

import pytest

from tracerl import tasks
from tracerl.core.types import Task
from tracerl.tasks.graders.code import extract_code, humaneval_program, mbpp_program, run_tests
from tracerl.tasks.sandbox import Limits, netns_available, run_python

FAST = Limits(timeout_s=2.0, memory_mb=256)


def test_a_plain_program_passes_in_a_fresh_folder_with_a_scrubbed_environment(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "x")
    result = run_python("import os\nprint(sorted(os.environ))\nprint(os.listdir('.'))\n", FAST)
    assert result.ok and result.reason == "passed" and result.returncode == 0
    assert "SECRET_TOKEN" not in result.stdout and "'HOME'" in result.stdout
    assert "main.py" in result.stdout


def test_an_infinite_loop_is_killed_at_the_timeout():
    result = run_python("while True:\n    pass\n", Limits(timeout_s=1.0))
    assert not result.ok and result.reason.startswith("timeout") and result.seconds < 5


def test_a_memory_hog_fails_with_the_memory_reason():
    result = run_python("blocks = []\nwhile True:\n    blocks.append(bytearray(10**7))\n", FAST)
    assert not result.ok and "memory" in result.reason


def test_a_network_attempt_is_blocked():
    result = run_python("import socket\nsocket.create_connection(('127.0.0.1', 80), timeout=1)\n", FAST)
    assert not result.ok and result.reason == "network access blocked"


@pytest.mark.skipif(not netns_available(), reason="unshare -rn (user namespaces) is not available here")
def test_the_network_namespace_stops_a_raw_socket_that_bypasses_python():
    netns_only = Limits(timeout_s=2.0, memory_mb=256, boundary=False)  # bubblewrap's own test: test_sandbox_boundary
    result = run_python("import _socket\ns = _socket.socket()\ns.settimeout(1)\ns.connect(('1.1.1.1', 80))\n", netns_only)
    assert not result.ok and result.isolation == "netns" and "unreachable" in result.reason


def test_processes_output_floods_and_early_exits_fail():
    assert run_python("import subprocess\nsubprocess.run(['true'])\n", FAST).reason == "starting a process blocked"
    flood = run_python("while True:\n    print('x' * 10000)\n", Limits(timeout_s=5.0, output_bytes=100_000))
    assert not flood.ok and flood.reason.startswith("output limit") and len(flood.stdout) <= 4000
    for early in ("import sys\nsys.exit(0)\nassert False\n", "import os\nos._exit(0)\n"):
        result = run_python(early, FAST)
        assert not result.ok and result.reason.startswith("exited before the end")
    failed = run_python("assert 1 == 2, 'nope'\n", FAST)
    assert not failed.ok and failed.reason == "error: AssertionError: nope"


def test_code_tasks_reward_zero_with_a_reason_and_the_caller_survives():
    spec = tasks.get("humaneval")
    task = Task(id="t", data={"prompt": "def f(x):\n    \"\"\"Double x.\"\"\"\n", "test": "def check(c):\n    assert c(2) == 4\n",
                              "entry_point": "f"}, dataset="humaneval")
    attacks = ["def f(x):\n    while True:\n        pass\n",
               "def f(x):\n    return bytearray(2**34)\n",
               "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9')\ndef f(x):\n    return 2 * x\n"]
    for code in attacks:
        text = f"```python\n{code}```"
        result = spec.source.grade(task, text)
        assert not result.ok and result.reason, code
        assert spec.reward(task, text) == 0.0
    assert os.getpid() > 0  # still here
    assert spec.reward(task, "```python\ndef f(x):\n    return 2 * x\n```") == 1.0


def test_humaneval_and_mbpp_programs():
    data = {"prompt": "from typing import List\n\ndef total(xs: List[int]) -> int:\n    \"\"\"Sum.\"\"\"\n",
            "test": "def check(candidate):\n    assert candidate([1, 2]) == 3\n", "entry_point": "total"}
    whole = humaneval_program(data, "def total(xs):\n    return sum(xs)\n")
    body = humaneval_program(data, "    return sum(xs)\n")
    assert run_tests(whole, FAST).ok and run_tests(body, FAST).ok
    assert not run_tests(humaneval_program(data, "    return 0\n"), FAST).ok
    mbpp = {"test_list": ["assert sq(3) == 9"], "test_setup_code": ""}
    assert run_tests(mbpp_program(mbpp, "def sq(n):\n    return n * n"), FAST).ok
    assert extract_code("Here:\n```python\nx = 1\n```\nand\n```py\ny = 2\n```") == "y = 2\n"
    assert extract_code("x = 3") == "x = 3" and extract_code(None) == ""
