"""A terminal task's work folder for one episode: set up, commands run, tests run, removed.

    with Workspace(task) as work:        # a fresh folder; files/ copied in, setup.sh run
        work.run("ls -la")               # SandboxResult: .ok, .reason, .stdout (output and errors)
        passed = work.test().ok          # test.sh, with $TASK_DIR the task's own folder
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from tracerl.core.errors import ConfigError

from .. import isolation
from ..sandbox import Limits, SandboxResult, run_shell
from . import TerminalTask

OUTPUT_CHARS = 3000  # of a command's output shown to the model (the end, where errors are)
TASK_DIR = "/tmp/task"  # where the task's own folder appears inside the sandbox, for setup and tests
# git needs an identity to commit, and the caller's home (where it would find one) is hidden
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "tracerl", "GIT_AUTHOR_EMAIL": "agent@tracerl.invalid",
                "GIT_COMMITTER_NAME": "tracerl", "GIT_COMMITTER_EMAIL": "agent@tracerl.invalid",
                "GIT_CONFIG_NOSYSTEM": "1"}


class Workspace:
    """One episode's work folder for ``task`` (a context manager; see the module docstring)."""

    def __init__(self, task: TerminalTask, limits: Limits | None = None):
        self.task = task
        self.limits = limits or Limits(timeout_s=task.command_timeout_s, memory_mb=1024, processes=64,
                                       output_bytes=1_000_000)
        self.boundary = isolation.available() if self.limits.boundary is None else self.limits.boundary
        self.folder: Path | None = None
        self.setup_result: SandboxResult | None = None

    def __enter__(self) -> Workspace:
        self.folder = Path(tempfile.mkdtemp(prefix=f"tracerl-terminal-{self.task.name}-"))
        files = self.task.folder / "files"
        if files.is_dir():
            shutil.copytree(files, self.folder, dirs_exist_ok=True, symlinks=True)
        setup = self.task.script("setup.sh")
        if setup is not None:
            self.setup_result = self._task_script(setup, self.task.test_timeout_s)
            if not self.setup_result.ok:
                raise ConfigError(f"terminal task {self.task.folder}: setup.sh failed ({self.setup_result.reason}): "
                                  f"{self.setup_result.stdout.strip()[-300:]}")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def run(self, command: str) -> SandboxResult:
        """``command`` run with bash in the work folder, as the agent's (no view of the task folder)."""
        return run_shell(command, self._folder(), self.limits, env=GIT_IDENTITY)

    def test(self) -> SandboxResult:
        """The task's test.sh in the work folder: ``.ok`` is the reward."""
        script = self.task.script("test.sh")
        assert script is not None  # read_task checked it
        return self._task_script(script, self.task.test_timeout_s)

    def _task_script(self, script: str, timeout_s: float) -> SandboxResult:
        limits = dataclasses.replace(self.limits, timeout_s=timeout_s, boundary=self.boundary)
        if self.boundary:
            return run_shell(script, self._folder(), limits, readonly={str(self.task.folder): TASK_DIR},
                             env={**GIT_IDENTITY, "TASK_DIR": TASK_DIR})
        return run_shell(script, self._folder(), limits, env={**GIT_IDENTITY, "TASK_DIR": str(self.task.folder)})

    def _folder(self) -> Path:
        if self.folder is None:
            raise RuntimeError("use the Workspace in a with block")
        return self.folder


def shown(result: SandboxResult) -> str:
    """What the model sees of a command's run: its output (the end of it) and how it ended."""
    output = result.stdout
    if len(output) > OUTPUT_CHARS:
        output = f"[... {len(output) - OUTPUT_CHARS} characters cut ...]\n" + output[-OUTPUT_CHARS:]
    status = result.reason if not result.reason.startswith("exit status") else f"exit status {result.returncode}"
    return f"{output.rstrip()}\n[{status}]".lstrip()


def check(task: TerminalTask) -> tuple[bool, bool]:
    """(whether the tests pass after solution.sh, whether they pass after doing nothing): a sound
    task answers (True, False)."""
    solution = task.script("solution.sh")
    if solution is None:
        raise ConfigError(f"terminal task {task.folder}: no solution.sh to check the tests against")
    with Workspace(task) as work:
        work.run(solution)
        solved = work.test().ok
    with Workspace(task) as work:
        idle = work.test().ok
    return solved, idle
