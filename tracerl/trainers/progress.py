"""What a person watching ``tracerl train`` sees: accuracy before, a live bar with the reward,
accuracy after. Quiet when ``progress`` is off (tests, logs)."""

from __future__ import annotations

from typing import Any

from .config import TrainConfig


class Progress:
    def __init__(self, cfg: TrainConfig, console: Any = None, start: int = 0):
        self.cfg = cfg
        self._bar: Any = None
        self.console = console
        if not cfg.progress:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self.console = console or Console()
        self._bar = RichProgress(
            TextColumn("[bold]train[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"), console=self.console, transient=False,
        )
        self._task = self._bar.add_task("train", total=cfg.steps, completed=start, status="")
        self._bar.start()

    def evaluated(self, step: int, report: Any) -> None:
        """One line per evaluation (an EvalReport): accuracy, how it was counted, mean reward."""
        if self.console is not None and self.cfg.progress:
            when = "before training" if step == 0 else "after training" if step == self.cfg.steps else f"at step {step}"
            if report.accuracy is None or report.reward_mean is None:
                self.console.print(f"held-out accuracy {when}: {report.not_measured()}", soft_wrap=True)
                return
            rule = f" ({report.accuracy_rule})" if report.accuracy_rule else ""
            part = (f" of {report.graded_count} graded episodes ({report.ungraded} without a reward)"
                    if report.ungraded else "")
            tools = "" if report.tool_use is None else f", a tool called in {report.tool_use:.0%} of episodes"
            self.console.print(f"held-out accuracy {when}: [bold]{report.accuracy:.1%}[/]{part}{rule}  "
                               f"(mean reward {report.reward_mean:.3f}{tools})")

    def step(self, step: int, metrics: dict[str, float]) -> None:
        if self._bar is None:
            return
        status = _offline_status(metrics) if self.cfg.from_traces else _rollout_status(metrics)
        self._bar.update(self._task, completed=step, status=status)
        if step % max(1, self.cfg.steps // 10) == 0 or step == self.cfg.steps:
            self.console.print(f"step {step:4d}  {status}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _rollout_status(metrics: dict[str, float]) -> str:
    tools = f"tool use {metrics['rollout/tool_use']:.0%}  " if "rollout/tool_use" in metrics else ""
    if "rollout/reward_mean" in metrics:
        graded = (f"reward {metrics['rollout/reward_mean']:.3f}  acc {metrics.get('rollout/accuracy', 0.0):.1%}  "
                  + (f"({metrics['rollout/ungraded']:.0f} ungraded)  " if "rollout/ungraded" in metrics else ""))
    else:  # nothing graded the step's episodes: no reward to show, and none is 0
        graded = "no reward  "
    return (f"{graded}{tools}"
            f"rollout {metrics.get('time/rollout_s', 0.0):.1f}s update {metrics.get('time/update_s', 0.0):.1f}s")


def _offline_status(metrics: dict[str, float]) -> str:
    """A step on recorded traces has no rollouts, so no reward or rollout time: say what it has."""
    return (f"loss {metrics.get('loss/sft', 0.0):.4f}  "
            f"trajectories {metrics.get('rft/step_trajectories', 0.0):.0f} of "
            f"{metrics.get('rft/offline_trajectories', 0.0):.0f}  "
            f"update {metrics.get('time/update_s', 0.0):.1f}s")
