"""``tracerl dashboard``, ``tracerl diagnose``, ``tracerl report`` and ``tracerl runs list | compare``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

runs_app = typer.Typer(help="Run folders: what ran, how it ended, how two compare.", no_args_is_help=True)


def console() -> Console:
    """A console for this command: it reads the terminal's width (COLUMNS) now, not at import."""
    return Console()

RunsOption = Annotated[Path | None, typer.Option("--runs", help="a folder of run folders (e.g. runs/)")]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _accuracy(run: Any, which: str) -> str:
    """A run's held-out accuracy ``before`` or ``after``: "no reward" where its evaluation ran and
    nothing graded it (never 0 %), the count of ungraded episodes where some were."""
    value, ungraded = run.accuracy(which), run.ungraded(which)
    if value is None:
        return "no reward" if ungraded else "-"
    return _pct(value) + (f" ({ungraded} ungraded)" if ungraded else "")


def dashboard(
    run: Annotated[list[Path] | None, typer.Argument(help="run folders (the --output of tracerl train)")] = None,
    runs: RunsOption = None,
    host: Annotated[str, typer.Option(help="bind address; anything but loopback needs --api-key")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8765,
    api_key: Annotated[str | None, typer.Option(envvar="TRACERL_DASHBOARD_API_KEY", help="require this Bearer key")] = None,
) -> None:
    """Serve a web page of runs: curves, groups, episodes with coloured tokens, why rewards were zero."""
    from tracerl.runs.server import Runs, serve

    shown = Runs(run or [], runs)
    for name in shown.names():
        view = shown.get(name)
        store = view.run.store()
        if store is not None:
            try:
                store.count()
            except Exception as exc:  # noqa: BLE001 - curves still work without episodes
                typer.echo(f"warning: {view.run.store_target}: {exc}; its episodes will not show", err=True)
            finally:
                store.close()
    where = f"http://{host}:{port}/" + (f"#key={api_key}" if api_key else "")
    typer.echo(f"dashboard of {len(shown.names())} run(s) on {where} (Ctrl-C to stop)")
    serve(shown, host, port, api_key)


def diagnose(run: Annotated[Path, typer.Argument(help="a run folder")],
             examples: Annotated[int, typer.Option(min=0, help="example episodes per cause")] = 2) -> None:
    """Why the reward was zero, cause by cause, and why episodes did not train."""
    from tracerl.runs.views import RunView

    view = RunView(run)
    d = view.diagnosis()
    console().print(f"[bold]{view.path}[/]: {d['episodes']} training episodes, {d['unrewarded']} without reward "
                  f"({_pct(d['unrewarded'] / max(1, d['episodes']))}); {d['eval_episodes']} evaluation episodes")
    table = Table("kind")
    table.add_column("why the reward was zero", no_wrap=True)  # a cause reads whole, whatever the width
    for name in ("episodes", "share"):
        table.add_column(name, justify="right")
    for c in d["causes"]:
        table.add_row(c["kind"], c["label"], str(c["episodes"]), _pct(c["episodes"] / max(1, d["unrewarded"])))
    console().print(table if d["causes"] else "every training episode earned a reward")
    if examples and d["causes"]:
        console().print(f"[bold]examples[/] (tracerl traces show ID --db {escape(view.run.store_target)})")
        for c in d["causes"]:
            for x in c["examples"][:examples]:
                console().print(f"  {c['label']}: {x['id']}" + (f"  {x['detail']}" if x["detail"] else ""), soft_wrap=True)
    console().print("[bold]why episodes did not train[/]")
    console().print(f"  {d['flat_episodes']} episodes in {d['flat_groups']} of {d['groups']} groups whose rewards were "
                  "all equal (dropped: no gradient)")
    for reason, count in sorted(d["excluded"].items()):
        console().print(f"  {count} excluded ({reason})")
    console().print(f"  {d['prefix_break_episodes']} split by a prefix break into more than one sequence")
    if d["eval_causes"]:
        causes = ", ".join(f"{k} {v}" for k, v in sorted(d["eval_causes"].items(), key=lambda kv: -kv[1]))
        console().print(f"[bold]evaluation[/]: {causes}")


def report(run: Annotated[Path, typer.Argument(help="a run folder")],
           html: Annotated[Path, typer.Option("--html", help="the file to write")],
           episodes: Annotated[int, typer.Option(min=0, help="episodes to include in full")] = 40) -> None:
    """Write one self-contained HTML file of a run: curves, the diagnosis, a sample of episodes."""
    from tracerl.runs.report import write_report

    size = write_report(run, html, episodes=episodes)
    typer.echo(f"wrote {html} ({size / 1024:.0f} KiB)")


@runs_app.command("list")
def list_(runs: RunsOption = None, store: Annotated[str | None, typer.Option(
        "--store", help="list the runs a span store holds (a path or postgresql:// URL shared by runs) instead")] = None,
) -> None:
    """Run folders under --runs (default: ./runs), newest first; with --store, the runs in that store."""
    from tracerl.runs.folder import find_runs

    if store is not None:
        _store_runs(store)
        return
    root = runs or Path("runs")
    found = find_runs(root)
    table = Table("run", "task")
    for name in ("steps", "accuracy before", "after", "mean reward", "status"):  # a narrow terminal folds the paths
        table.add_column(name, no_wrap=True)
    rules: dict[str, str] = {}  # rule -> its footnote mark
    for r in found:
        mark = rules.setdefault(r.accuracy_rule, "*" * (len(rules) + 1)) if r.accuracy_rule else ""
        table.add_row(str(r.path), r.task, f"{r.steps_done}/{r.steps}", _accuracy(r, "before") + mark,
                      _accuracy(r, "after") + mark, _rewards(r), r.status)
    console().print(table if found else f"no runs under {root}")
    for rule, mark in rules.items():  # below the table: a narrow terminal would fold it inside
        console().print(f"{mark} {rule}: the reward gave no is_correct; accuracy counts a reward that reaches reward_max")


def _store_runs(target: str) -> None:
    from datetime import datetime, timezone

    from tracerl.core.store import open_store

    def when(ns: int) -> str:
        return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")

    with open_store(target, read_only=True) as spans:
        found = spans.runs()
        table = Table("run id", "episodes", "spans", "first span (UTC)", "last span (UTC)")
        for r in found:
            table.add_row(r.run_id, str(r.episodes), str(r.spans), when(r.start_ns), when(r.end_ns))
        console().print(table if found else f"no runs in {spans.where} (only spans of runs since 0.3 carry a run id)")


def _rewards(run: Any) -> str:
    def one(which: str) -> str:
        value = run.reward(which)
        return ("no reward" if run.ungraded(which) else "-") if value is None else f"{value:.3f}"

    return " → ".join(one(which) for which in ("before", "after"))


@runs_app.command("compare")
def compare(a: Annotated[Path, typer.Argument(help="a run folder")],
            b: Annotated[Path, typer.Argument(help="another run folder")]) -> None:
    """Two runs side by side: settings that differ, accuracy, and the last value of key metrics."""
    from tracerl.runs.folder import open_run

    ra, rb = open_run(a), open_run(b)
    table = Table("", str(a), str(b))
    for key in sorted(set(_flat(ra.config)) | set(_flat(rb.config))):
        va, vb = _flat(ra.config).get(key), _flat(rb.config).get(key)
        if va != vb and key != "output":
            table.add_row(key, str(va), str(vb))
    table.add_row("status", ra.status, rb.status)
    table.add_row("steps", f"{ra.steps_done}/{ra.steps}", f"{rb.steps_done}/{rb.steps}")
    table.add_row("accuracy before", _accuracy(ra, "before"), _accuracy(rb, "before"))
    table.add_row("accuracy after", _accuracy(ra, "after"), _accuracy(rb, "after"))
    table.add_row("accuracy counted by", ra.accuracy_rule or "is_correct", rb.accuracy_rule or "is_correct")
    table.add_row("mean reward before → after", _rewards(ra), _rewards(rb))
    for key in ("rollout/reward_mean", "rollout/response_length_mean", "stats/entropy", "time/rollout_s", "time/update_s"):
        table.add_row(f"last {key}", _last(ra.metrics, key), _last(rb.metrics, key))
    console().print(table)


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _last(records: list[dict], key: str) -> str:
    values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return f"{values[-1]:.4g}" if values else "-"
