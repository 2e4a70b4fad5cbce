"""A run folder, read-only: its config, metrics, status and span store.

    runs/demo/
        config.json     the TrainConfig as run          (written when the run starts)
        run.json        status: running, finished, interrupted or failed, with the pid
        metrics.jsonl   one record per step (and per evaluation), appended as training goes
        traces.db       every rollout's spans (SQLite, WAL)

A folder with config.json and metrics.jsonl or traces.db is a run. A run starts once its
preflight passes (:mod:`tracerl.trainers.attempt`): a failed preflight leaves no folder to list.
Nothing here writes: the store is opened read-only, metrics are read line by line (a line being
written is skipped).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracerl.core.errors import ConfigError, StoreError
from tracerl.core.grading import accuracy_rule
from tracerl.core.store import RUN_STORE, STORE_ENV, SpanStore, is_url, run_store

STATUS_FILE = "run.json"
STATUSES = ("running", "finished", "interrupted", "failed")


class RunError(ConfigError):
    """A folder that is not a run, or a run that cannot be read."""


@dataclass
class Run:
    path: Path
    config: dict[str, Any]
    status: str
    error: str | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def task(self) -> str:
        data = self.config.get("data")
        return f"--data {data['path']}" if isinstance(data, dict) and data.get("path") else str(self.config.get("task"))

    @property
    def steps(self) -> int:
        return int(self.config.get("steps") or 0)

    @property
    def steps_done(self) -> int:
        done = [int(r["step"]) for r in self.metrics if "time/update_s" in r]
        return max(done, default=0)

    def accuracy(self, which: str) -> float | None:
        """``before`` (step 0's held-out accuracy) or ``after`` (the last one measured)."""
        return self._evaluation(which, "eval/accuracy")

    def reward(self, which: str) -> float | None:
        """The held-out mean reward ``before`` or ``after``, as :meth:`accuracy`."""
        return self._evaluation(which, "eval/reward_mean")

    def ungraded(self, which: str) -> int | None:
        """How many episodes of the evaluation ``before`` or ``after`` nothing graded (None when
        it recorded none): its accuracy is over the others, and not measured when all were."""
        value = self._evaluation(which, "eval/ungraded")
        return None if value is None else int(value)

    @property
    def accuracy_rule(self) -> str | None:
        """How its accuracy was counted where the reward gave no ``is_correct`` (None: it did)."""
        judged = sum(float(r.get("eval/judged_by_reward_max") or 0) for r in self.metrics)
        return accuracy_rule(judged, float(self.config.get("reward_max") or 1.0))

    def _evaluation(self, which: str, key: str) -> float | None:
        found = [(int(r["step"]), float(r[key])) for r in self.metrics if key in r]
        if not found:
            return None
        if which == "before":
            return next((a for s, a in found if s == 0), None)
        return found[-1][1] if found[-1][0] > 0 else None

    @property
    def updated(self) -> float:
        """When the run last wrote metrics (epoch seconds)."""
        return max((float(r.get("time", 0)) for r in self.metrics), default=_mtime(self.path / "config.json"))

    @property
    def run_id(self) -> str | None:
        """The id on the run's spans (runs before 0.3 had none)."""
        value = self.config.get("run_id")
        return str(value) if value else None

    def store(self) -> SpanStore | None:
        """The run's span store, read-only: the shared store it wrote (seen through its run id),
        else its folder's traces.db (None when the run has none yet)."""
        shared = self.config.get("store")
        if shared:
            try:
                return run_store(self.path, read_only=True, store=str(shared), run_id=self.run_id)
            except StoreError as exc:
                raise _password_hint(self.path, str(shared), exc) from exc
        return run_store(self.path, read_only=True) if (self.path / RUN_STORE).is_file() else None

    @property
    def store_target(self) -> str:
        """Where the run's spans are, as ``--db`` takes it: the shared store it recorded (a URL
        without its password), else its folder's traces.db."""
        shared = self.config.get("store")
        return str(shared) if shared else str(self.path / RUN_STORE)


def _password_hint(path: Path, recorded: str, exc: StoreError) -> StoreError:
    """A PostgreSQL store that refused the run folder's URL for its password: say where one comes
    from (the folder records the URL without it)."""
    if not is_url(recorded) or "password" not in str(exc).lower():
        return exc
    return StoreError(f"{exc}; {path / 'config.json'} records the store without its password: set {STORE_ENV} to "
                      "that URL with the password (postgresql://USER:PASSWORD@HOST:PORT/DB), or give it to libpq "
                      "in PGPASSWORD or ~/.pgpass")


def is_run(path: Path) -> bool:
    return (path / "config.json").is_file() and ((path / "metrics.jsonl").is_file() or (path / "traces.db").is_file())


def open_run(path: Path | str) -> Run:
    """The run in ``path``; RunError (one line) when it is not one."""
    path = Path(path)
    if not path.is_dir():
        raise RunError(f"{path}: no such folder")
    if not (path / "config.json").is_file():
        raise RunError(f"{path} is not a run folder (no config.json); pass the --output folder of a "
                       "`tracerl train`, or --runs DIR to list the runs in DIR")
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise RunError(f"{path / 'config.json'} cannot be read: {exc}") from exc
    if not isinstance(config, dict):
        raise RunError(f"{path / 'config.json'} holds no settings")
    run = Run(path, config, "running", metrics=read_metrics(path / "metrics.jsonl"))
    run.status, run.error = _status(run)
    return run


def find_runs(root: Path | str) -> list[Run]:
    """The runs in ``root`` and its sub-folders (two levels), newest first."""
    root = Path(root)
    if not root.is_dir():
        raise RunError(f"--runs {root}: no such folder")
    found = [root] if is_run(root) else []
    for child in sorted(root.iterdir()):
        if child.is_dir() and is_run(child):
            found.append(child)
        elif child.is_dir():
            found += [c for c in sorted(child.iterdir()) if c.is_dir() and is_run(c)]
    runs = [open_run(p) for p in found]
    return sorted(runs, key=lambda r: r.updated, reverse=True)


def read_metrics(path: Path, start: int = 0) -> list[dict[str, Any]]:
    """The records of metrics.jsonl from line ``start`` on; a torn or foreign line is skipped."""
    out: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i < start or not line.endswith("\n"):
                    continue  # the last line may still be being written
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and "step" in record:
                    out.append(record)
    except FileNotFoundError:
        return out
    return out


def write_status(output: Path, status: str, error: str | None = None) -> None:
    """The trainer's side: record the run's status (atomically: a reader sees old or new)."""
    assert status in STATUSES
    doc = {"status": status, "pid": os.getpid(), "host": os.uname().nodename, "time": time.time(), "error": error}
    tmp = output / f".{STATUS_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, output / STATUS_FILE)


def _status(run: Run) -> tuple[str, str | None]:
    try:
        doc = json.loads((run.path / STATUS_FILE).read_text())
    except (OSError, ValueError):
        doc = None
    if isinstance(doc, dict) and doc.get("status") in STATUSES:
        if doc["status"] == "running" and doc.get("host") == os.uname().nodename and not _alive(doc.get("pid")):
            return "interrupted", "the training process is gone (killed?)"
        return str(doc["status"]), doc.get("error")
    # a run from before run.json: finished when its last step is there, else by how recent it is
    if run.steps and run.steps_done >= run.steps:
        return "finished", None
    return ("running" if time.time() - run.updated < 300 else "interrupted"), None


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, TypeError, ValueError):
        return False
    except PermissionError:
        return True
    return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
