"""Code rewards: pull the program out of a reply, append the benchmark's tests, run it sandboxed.

The reward of a reply is 1.0 when the program plus tests runs to its end with exit status 0
in :func:`tracerl.tasks.sandbox.run_python`, else 0.0; the result's ``reason`` says why.
"""

from __future__ import annotations

import re
from typing import Any

from ..sandbox import Limits, SandboxResult, run_python

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(text: str | None) -> str:
    """The last fenced code block of a reply, or the whole reply when it has no fence."""
    if not text:
        return ""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else text


def humaneval_program(data: dict[str, Any], code: str) -> str:
    """HumanEval: the prompt (imports, signature, docstring), the reply, ``test`` and the check.

    A reply that defines the entry point is a whole function and redefines the prompt's stub
    (a function whose body is only a docstring is valid Python); one that does not is the
    body that completes the prompt.
    """
    defines = re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(data['entry_point'])}\s*\(", code, re.MULTILINE)
    body = f"{data['prompt']}\n{code}" if defines else f"{data['prompt']}{code}"
    return f"{body}\n\n{data['test']}\n\ncheck({data['entry_point']})\n"


def mbpp_program(data: dict[str, Any], code: str) -> str:
    """MBPP: ``test_setup_code``, the reply, then every assert of ``test_list``."""
    setup = data.get("test_setup_code") or ""
    return "\n".join([setup, code, "", *data["test_list"], ""])


def run_tests(program: str, limits: Limits | None = None) -> SandboxResult:
    """Run ``program`` (code plus its tests) in the sandbox."""
    return run_python(program, limits or Limits(timeout_s=10.0, memory_mb=1024))
