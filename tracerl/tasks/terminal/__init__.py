"""The terminal environment: tasks done at a bash shell, each a folder, scored by its own test script.

A task folder (the format Terminal-Bench uses, without the container)::

    count-errors/
      instruction.md     what the agent is asked (required)
      test.sh            decides the reward after the episode: exit status 0 -> 1.0, else 0.0 (required)
      solution.sh        a reference solution: test.sh must pass after it, and fail after nothing
      setup.sh           optional: prepares the work folder before the agent starts (files, a git repo)
      task.yaml          optional: split (train | test), max_turns, command_timeout_s, test_timeout_s
      files/             optional: copied into the work folder before setup.sh

Every episode gets a fresh work folder. ``setup.sh``, the agent's commands and ``test.sh`` all
run there with ``bash``, in the code sandbox (:func:`~tracerl.tasks.sandbox.run_shell`: under
bubblewrap no network, a read-only system, the work folder the one writable place, limits on
memory, CPU, processes and output). The task's own folder is visible only to ``setup.sh`` and
``test.sh``, as ``$TASK_DIR``: for the agent's commands every task folder the sandbox would show
(this one, its siblings, the built-in ones inside the installed package, every registered set)
is covered by an empty one (:func:`~.environment.hidden_folders`), and where bubblewrap does not
run, terminal tasks are refused unless ``--allow-unsandboxed`` accepts the risk. Each command is
a new ``bash``: files persist between commands, the current folder and variables do not.
``task.yaml`` is checked by :class:`TaskSettings` (strict types, bounds), each mistake one line
naming the file and the key.

``tracerl tasks check terminal [--path FOLDER]`` runs every task's solution and a no-op through
its tests (the solution must score 1 and doing nothing 0, as Terminal-Bench checks its tasks). Your own tasks:
``register("my-terminal", "path/to/folder-of-task-folders")``, then ``tracerl train my-terminal``
from code that imports it, or put them under ``$TRACERL_DATA_DIR/terminal/`` to add them to the
built-in ``terminal`` task.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tracerl.core.errors import ConfigError
from tracerl.core.types import Task

from ..benchmarks import in_test, seeded_draw

BUILTIN = Path(__file__).parent / "tasks"
SYSTEM_PROMPT = (
    "You are at a bash shell in a Linux work folder. Each reply of yours is run there as a command (or a "
    "short script in one ```bash block) and you then see its output and exit status. Work step by step. "
    "When the task is done, reply: exit"
)


class TaskSettings(BaseModel):
    """A task folder's ``task.yaml``: every key optional, each checked (strict: ``"5"`` is not 5)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    split: Literal["train", "test"] | None = None
    """The task's split; None: drawn by the task name's hash, as the catalogue splits rows."""
    max_turns: int = Field(10, ge=1, le=1000)
    """Replies (commands) the agent may make before the tests run."""
    command_timeout_s: float = Field(10.0, gt=0, le=3600)
    """Seconds one of the agent's commands may run before it is killed."""
    test_timeout_s: float = Field(30.0, gt=0, le=3600)
    """Seconds setup.sh, and then test.sh, may run; a test.sh past it scores 0, with the reason said."""


@dataclass(frozen=True)
class TerminalTask:
    """One task folder, read and checked (see the module docstring)."""

    name: str
    folder: Path
    instruction: str
    split: str | None
    max_turns: int = 10
    command_timeout_s: float = 10.0
    test_timeout_s: float = 30.0

    def script(self, name: str) -> str | None:
        path = self.folder / name
        return path.read_text(encoding="utf-8") if path.is_file() else None


def _settings(path: Path) -> TaskSettings:
    """``path``'s task.yaml, validated; each mistake one ConfigError line naming the file and the key."""
    import yaml
    from pydantic import ValidationError

    file = path / "task.yaml"
    if not file.is_file():
        return TaskSettings()
    try:
        loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"terminal task {file}: not valid YAML{where}: {problem}") from None
    if loaded is None:
        return TaskSettings()
    if not isinstance(loaded, dict):
        raise ConfigError(f"terminal task {file}: must be a mapping of settings "
                          f"({', '.join(TaskSettings.model_fields)}), not {type(loaded).__name__}")
    try:
        return TaskSettings.model_validate(loaded)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(x) for x in error.get("loc", ())) or "task.yaml"
            if error.get("type") == "extra_forbidden":
                problems.append(f"{key}: unknown setting (known: {', '.join(TaskSettings.model_fields)})")
            else:
                problems.append(f"{key}: {error.get('msg')} (got {error.get('input')!r})")
        raise ConfigError(f"terminal task {file}: {'; '.join(problems)}") from None


def read_task(folder: str | os.PathLike[str]) -> TerminalTask:
    """The task in ``folder``; a ConfigError line names the folder (or its task.yaml) and what is
    missing or wrong."""
    path = Path(folder)
    for required in ("instruction.md", "test.sh"):
        if not (path / required).is_file():
            raise ConfigError(f"terminal task {path}: no {required} (a task folder holds instruction.md, "
                              "test.sh, solution.sh and optionally setup.sh, task.yaml, files/)")
    settings = _settings(path)
    instruction = (path / "instruction.md").read_text(encoding="utf-8").strip()
    if not instruction:
        raise ConfigError(f"terminal task {path}: instruction.md is empty")
    return TerminalTask(path.name, path, instruction, settings.split, settings.max_turns,
                        settings.command_timeout_s, settings.test_timeout_s)


def read_tasks(root: str | os.PathLike[str]) -> list[TerminalTask]:
    """Every task folder directly under ``root`` (folders holding an instruction.md), by name."""
    folder = Path(root)
    if not folder.is_dir():
        raise ConfigError(f"terminal tasks: {folder} is not a folder of task folders")
    found = [read_task(p) for p in sorted(folder.iterdir()) if (p / "instruction.md").is_file()]
    if not found:
        raise ConfigError(f"terminal tasks: no task folder (with an instruction.md) under {folder}")
    return found


def _split_of(task: TerminalTask) -> str:
    if task.split is not None:
        return task.split
    return "test" if in_test(task.name) else "train"


class TerminalTasks:
    """A set of terminal tasks as a registry task source (``tasks``/``messages``/``tools``...)."""

    domain = "terminal"
    grader = "the task's test.sh, run in the work folder after the episode; exit status 0 scores 1"
    tool_names = ("shell",)
    default_agent = "tracerl.tasks.terminal.agent:terminal_agent"
    max_turns = 10

    def __init__(self, name: str, roots: list[Path], description: str):
        self.name, self.roots, self.description = name, roots, description

    def folders(self) -> list[Path]:
        """The folders of task folders, in order: a later one's task replaces one of the same name."""
        return self.roots

    def all(self) -> list[TerminalTask]:
        found: dict[str, TerminalTask] = {}
        for root in self.folders():
            for task in read_tasks(root):
                found[task.name] = task  # a later root's task of the same name replaces a built-in one
        return list(found.values())

    def find(self, task: Task) -> TerminalTask:
        """The task folder a Task was made from."""
        return read_task(task.data["folder"])

    def tasks(self, split: str, n: int, seed: int = 0) -> list[Task]:
        if split not in ("train", "test"):
            raise ConfigError(f"{self.name}: split must be train or test, not {split!r}")
        pool = sorted((t for t in self.all() if _split_of(t) == split), key=lambda t: t.name)
        drawn = seeded_draw(f"{self.name}:{split}:{seed}", len(pool), n, cycle=split == "train")
        out = [self._task(pool[i], split, epoch) for epoch, i in drawn]
        return out

    def _task(self, task: TerminalTask, split: str, epoch: int) -> Task:
        suffix = f"/e{epoch}" if epoch else ""
        return Task(id=f"{self.name}/{task.name}{suffix}", dataset=self.name, split=split,
                    data={"task": task.name, "instruction": task.instruction, "folder": str(task.folder)})

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"{task.data['instruction']}\n\nThe work folder is your current folder."}]

    def tools(self, task: Task) -> list[dict[str, Any]]:
        from .agent import SHELL_TOOL

        return [SHELL_TOOL]

    def feedback(self, task: Task, text: str | None, turn: int) -> str | None:
        return None

    def is_correct(self, task: Task, text: str | None) -> bool:
        """Replay ``text`` as the agent's commands in a fresh work folder, then run the tests."""
        from .environment import Workspace

        if not text or not text.strip():
            return False
        with Workspace(self.find(task)) as work:
            work.run(text)
            return work.test().ok

    def reward(self, task: Task, text: str | None, turns: int = 1) -> float:
        return 1.0 if self.is_correct(task, text) else 0.0

    def solution(self, task: Task) -> str | None:
        return self.find(task).script("solution.sh")


def builtin_roots() -> list[Path]:
    """The built-in tasks, and ``$TRACERL_DATA_DIR/terminal/`` where it exists (read at use)."""
    roots = [BUILTIN]
    data_dir = os.environ.get("TRACERL_DATA_DIR")
    if data_dir and (Path(data_dir) / "terminal").is_dir():
        roots.append(Path(data_dir) / "terminal")
    return roots


class BuiltinTerminalTasks(TerminalTasks):
    """The built-in tasks, plus any under ``$TRACERL_DATA_DIR/terminal/``."""

    def __init__(self) -> None:
        super().__init__("terminal", [BUILTIN], "shell tasks in a sandboxed work folder (files, text processing, "
                         "git), scored by each task's test script")

    def folders(self) -> list[Path]:
        return builtin_roots()  # $TRACERL_DATA_DIR read at use, not at import


def register(name: str, folder: str | os.PathLike[str], *, replace: bool = False) -> Any:
    """Register the task folders under ``folder`` as task ``name`` (``tracerl train NAME``)."""
    from tracerl.tasks import REGISTRY, TaskSpec

    if name in REGISTRY and not replace:
        raise ConfigError(f"task {name!r} is already registered; pick another name or pass replace=True")
    source = TerminalTasks(name, [Path(folder)], f"terminal tasks in {folder}")
    source.all()  # read them now: a broken task folder is an error here, not mid-run
    spec = TaskSpec(name, source, source.default_agent, source.description)
    REGISTRY[name] = spec
    return spec
