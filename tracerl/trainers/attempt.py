"""When a training run starts, and what an attempt that never started leaves behind: nothing.

**Preflight** is every check that can fail before the first step, in this order: the config and
the output folder (a previous run's checkpoints without ``--resume``), the engine's settings;
the data, agent and reward (loaded, not yet run); the model; the recorded traces
(``--from-traces``); the engine or the ``--gateway`` replicas answering (their ``/health``: up,
taking weights, the run's model and span store); and one episode graded by the reward
(``--reward``). A run **starts** when all of them pass: only then does :meth:`Attempt.start`
write ``config.json``, ``code.diff``, ``heldout.json`` and ``run.json`` (status ``running``), the
files that make a folder a run to ``tracerl runs list``, the dashboard and ``tracerl diagnose``.

A failed preflight is not a run: :meth:`Attempt.abandon` removes what the attempt created (the
output folder itself, and the parents it made, when it made them; else only the entries that
were not there before) and keeps everything a previous run stored there, a resumed run's
checkpoints, metrics and traces included. The one trace of it that stays is in a span store that
existed before: a resumed run's ``traces.db`` or a shared ``--store`` keeps the spans of the
graded preflight episode.

A started run ends ``finished``, ``failed`` (an exception: its type and message in ``run.json``)
or ``interrupted`` (Ctrl-C). It never stays ``running``: a ``running`` whose process is gone
reads as ``interrupted`` (killed), see :func:`tracerl.runs.folder.open_run`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tracerl.core.store import recorded
from tracerl.runs.folder import write_status

from .config import TrainConfig
from .provenance import write_code_diff
from .rft import HELDOUT_FILE

__all__ = ["Attempt"]


class Attempt:
    """One ``tracerl train`` into ``output``: created before the preflight, :meth:`start`-ed
    after it, :meth:`abandon`-ed (a no-op once started) however it ends."""

    def __init__(self, output: Path):
        self.output = output
        self.made = _missing(output)  # the folders this attempt creates, output first
        self.before = set() if self.made else set(os.listdir(output))
        self.started = False
        output.mkdir(parents=True, exist_ok=True)  # the preflight's store and logs go here

    def start(self, cfg: TrainConfig, heldout: set[str]) -> None:
        """The preflight passed: write the files that make the folder a run."""
        # no password on disk: a resumed run or the dashboard finds it in $TRACERL_STORE or libpq's own
        run_cfg = cfg.model_copy(update={"store": recorded(cfg.store)})
        (self.output / "config.json").write_text(run_cfg.model_dump_json(indent=2))
        if cfg.code_diff:
            write_code_diff(self.output)
        # kept beside the run's traces: whoever trains on them later (--from-traces) leaves these out
        (self.output / HELDOUT_FILE).write_text(json.dumps({"task_ids": sorted(heldout)}))
        write_status(self.output, "running")
        self.started = True

    def end(self, status: str, error: str | None = None) -> None:
        """Record how a started run ended (nothing for one that never started)."""
        if self.started:
            write_status(self.output, status, error)

    def abandon(self) -> None:
        """Remove what a failed preflight created; nothing once the run started."""
        if self.started:
            return
        if self.made:
            shutil.rmtree(self.output, ignore_errors=True)
            for parent in self.made[1:]:  # only while empty: another run may have started beside
                try:
                    parent.rmdir()
                except OSError:
                    break
            return
        for name in set(os.listdir(self.output)) - self.before:
            path = self.output / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def _missing(path: Path) -> list[Path]:
    """``path`` and its parents that do not exist yet, deepest first."""
    missing = []
    path = path.absolute()
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing
