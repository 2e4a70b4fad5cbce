"""A terminal task's work folder for one episode: set up, commands run, tests run, removed.

    with Workspace(task) as work:        # a fresh folder; files/ copied in, setup.sh run
        work.run("ls -la")               # SandboxResult: .ok, .reason, .stdout (output and errors)
        passed = work.test().ok          # test.sh, with $TASK_DIR the task's own folder

The agent's commands never see a task folder: the task's own, its sibling task folders and the
built-in ones inside the installed package are each covered by an empty read-only folder in the
sandbox (``cat``, ``bash .../solution.sh`` and ``find / -name solution.sh`` find nothing), while
``setup.sh`` and ``test.sh`` get the task's folder at ``$TASK_DIR``. That needs the boundary
(bubblewrap): without it a Workspace refuses to start, in one line naming the risk and the
opt-in (``--allow-unsandboxed``, ``TRACERL_ALLOW_UNSANDBOXED=1``, or ``Limits(boundary=False)``
in code), since the agent's commands would run on this machine as its user.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from tracerl.core.errors import ConfigError

from .. import isolation
from ..sandbox import Limits, SandboxResult, run_shell
from . import TerminalTask, TerminalTasks, builtin_roots

OUTPUT_CHARS = 3000  # of a command's output shown to the model (the end, where errors are)
TASK_DIR = "/tmp/task"  # where the task's own folder appears inside the sandbox, for setup and tests
ALLOW_UNSANDBOXED_ENV = "TRACERL_ALLOW_UNSANDBOXED"  # "1": run without bubblewrap, risk accepted
# git needs an identity to commit, and the caller's home (where it would find one) is hidden
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "tracerl", "GIT_AUTHOR_EMAIL": "agent@tracerl.invalid",
                "GIT_COMMITTER_NAME": "tracerl", "GIT_COMMITTER_EMAIL": "agent@tracerl.invalid",
                "GIT_CONFIG_NOSYSTEM": "1"}


def unsandboxed_allowed() -> bool:
    """Whether the caller accepted running without bubblewrap (``$TRACERL_ALLOW_UNSANDBOXED``, read at use)."""
    return os.environ.get(ALLOW_UNSANDBOXED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def refuse_unsandboxed(what: str) -> None:
    """Raise one ConfigError line when bubblewrap does not run here and the risk was not accepted:
    ``what`` runs the model's code (terminal commands, code replies), which would then run on this
    machine as this user."""
    if isolation.available() or unsandboxed_allowed():
        return
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    raise ConfigError(f"{what}: bubblewrap does not run here, so the model's commands would run on this machine "
                      f"as {user}, able to read the tests and solutions and any file {user} can and to write "
                      f"wherever {user} may; install it (apt install bubblewrap) or accept the risk with "
                      f"--allow-unsandboxed ({ALLOW_UNSANDBOXED_ENV}=1)")


def hidden_folders(task: TerminalTask) -> list[str]:
    """The folders the agent's commands must not see: the task's own, its sibling task folders
    (their tests and solutions), every folder of built-in tasks (the installed package's) and of
    registered terminal tasks."""
    from tracerl.tasks import REGISTRY

    roots = [*builtin_roots(), *(root for spec in REGISTRY.values() if isinstance(spec.source, TerminalTasks)
                                 for root in spec.source.folders())]
    found = {str(Path(root).resolve()) for root in roots}
    folder = task.folder.resolve()
    found.add(str(folder))
    if folder.parent != folder:
        found |= {str(p) for p in folder.parent.iterdir() if (p / "instruction.md").is_file()}
    # only where the sandbox shows files (the rest of the host is not there), and one cover per
    # outermost folder: a cover under another cover would have nowhere to mount
    shown = isolation.bound_folders()
    found = {p for p in found if any(p == q or p.startswith(q.rstrip("/") + "/") for q in shown) and _reachable(p)}
    return sorted(p for p in found if not any(p.startswith(q + "/") for q in found))


def _reachable(path: str) -> bool:
    """Whether the sandbox's user can get to ``path`` (a cover can only be mounted there): where
    the caller is root the sandbox runs as an unprivileged uid, which needs every folder on the way
    open to others, and cannot read what is behind one that is not anyway."""
    if os.geteuid() != 0:
        return True
    folder = Path(path)
    return all(p.stat().st_mode & 0o001 for p in (folder, *folder.parents))


class Workspace:
    """One episode's work folder for ``task`` (a context manager; see the module docstring)."""

    def __init__(self, task: TerminalTask, limits: Limits | None = None):
        self.task = task
        self.limits = limits or Limits(timeout_s=task.command_timeout_s, memory_mb=1024, processes=64,
                                       output_bytes=1_000_000)
        if self.limits.boundary is None:  # Limits(boundary=False) in code is the caller's own opt-in
            refuse_unsandboxed(f"terminal task {task.name}")
        self.boundary = isolation.available() if self.limits.boundary is None else self.limits.boundary
        self.folder: Path | None = None
        self.covers: Path | None = None  # empty folders bound over the hidden ones, for the agent's commands
        self._covered: dict[str, str] = {}  # cover -> the folder it hides
        self.setup_result: SandboxResult | None = None

    def __enter__(self) -> Workspace:
        try:
            self.folder = Path(tempfile.mkdtemp(prefix=f"tracerl-terminal-{self.task.name}-"))
            files = self.task.folder / "files"
            if files.is_dir():
                shutil.copytree(files, self.folder, dirs_exist_ok=True, symlinks=True)
            setup = self.task.script("setup.sh")
            if setup is not None:
                self.setup_result = self._task_script(setup, self.task.test_timeout_s)
                if not self.setup_result.ok:
                    raise ConfigError(f"terminal task {self.task.folder}: setup.sh failed ({self.setup_result.reason})"
                                      f": {self.setup_result.stdout.strip()[-300:]}")
        except BaseException:
            self.__exit__(None, None, None)  # a failed or hung setup leaves no folder behind
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for folder in (self.folder, self.covers):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self.folder = self.covers = None

    def run(self, command: str) -> SandboxResult:
        """``command`` run with bash in the work folder, as the agent's: every task folder covered."""
        limits = dataclasses.replace(self.limits, boundary=self.boundary)
        return run_shell(command, self._folder(), limits, env=GIT_IDENTITY,
                         readonly=self._covers() if self.boundary else None)

    def _covers(self) -> dict[str, str]:
        """An empty read-only folder over each of :func:`hidden_folders` (made once per episode)."""
        if self.covers is None:
            self.covers = Path(tempfile.mkdtemp(prefix="tracerl-terminal-covers-"))
            self._covered = {}
            for i, path in enumerate(hidden_folders(self.task)):
                (self.covers / str(i)).mkdir()
                self._covered[str(self.covers / str(i))] = path
        return self._covered

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
