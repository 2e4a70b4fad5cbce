"""``tracerl traces``: list, show, export and import the spans in a span store."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from tracerl.cli.serve import StoreOption
from tracerl.core.errors import ConfigError
from tracerl.core.export import check_service, select_episodes
from tracerl.core.semconv import GATEWAY_SERVICE
from tracerl.core.spans import SpanRecord, dumps_jsonl
from tracerl.core.store import SpanStore, default_store_target, is_url, open_store, write_parquet

app = typer.Typer(help="Inspect, export and import stored traces (one episode per session).", no_args_is_help=True)


def console() -> Console:
    """A console for this command: it reads the terminal's width (COLUMNS) now, not at import."""
    return Console()

DbOption = StoreOption
RunIdOption = Annotated[str | None, typer.Option(
    "--run-id", help="only this run's episodes, in a store that several runs write (`tracerl runs list --store`)")]
SinceOption = Annotated[
    str | None, typer.Option("--since", help="only episodes started in the last 30s/15m/2h/7d")
]
ServiceOption = Annotated[str | None, typer.Option(
    "--service", help="only the episodes of this app: its OpenTelemetry service.name (instrument(service_name=...) "
    "or OTEL_SERVICE_NAME), whole, the gateway's token spans included")]


def parse_since(text: str | None) -> int | None:
    """'15m' -> the epoch-ns start of the last 15 minutes."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if match is None:
        raise ConfigError(f"--since {text!r}: use a number and a unit s, m, h or d, e.g. 15m")
    seconds = float(match[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]
    return time.time_ns() - int(seconds * 1e9)


def _open(db: str | Path | None, must_exist: bool = True, run_id: str | None = None) -> SpanStore:
    target = str(db) if db is not None else default_store_target()
    if db is not None and must_exist and not is_url(target) and not Path(target).exists():
        raise ConfigError(f"no span store at {db}; check --db (the default is $TRACERL_STORE, else "
                          "$TRACERL_HOME/traces.db)")
    return open_store(target, run_id=run_id)


def _when(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@app.command("list")
def list_(db: DbOption = None, since: SinceOption = None, limit: int = typer.Option(20, min=1),
          run_id: RunIdOption = None, service: ServiceOption = None) -> None:
    """List stored episodes, newest first: LLM calls (each once, however many spans recorded
    it), reward, how each ended, and the app (service) that wrote it."""
    from tracerl.core.convert import episode_from_spans

    with _open(db, run_id=run_id) as store:
        if service is not None:
            check_service(store, service)
        rows = store.sessions(since_ns=parse_since(since), limit=limit, service=service)
        table = Table("llm calls", "reward", "ending", "service", "started (UTC)", "duration", "spans")
        table.add_column("episode", no_wrap=True)
        for r in rows:
            records = store.spans(session_id=r.session_id)
            ep = episode_from_spans(records, episode_id=r.session_id)
            table.add_row(str(len(ep.steps)), "-" if ep.reward is None else f"{ep.reward:g}", ep.termination_reason.value,
                          _services(records), _when(r.start_ns), f"{max(0, r.end_ns - r.start_ns) / 1e9:.2f}s",
                          str(r.spans), r.session_id)
        scope = (f" of run {run_id}" if run_id else "") + (f" of service {service}" if service else "")
        console().print(table if rows else f"no episodes in {store.where}{scope}")


def _services(records: list[SpanRecord]) -> str:
    """The apps that wrote an episode; the gateway only where no app's span is there (a client
    with no adapter, on the session URL)."""
    found = sorted({name for r in records if (name := r.service) is not None})
    apps = [name for name in found if name != GATEWAY_SERVICE]
    return ", ".join(apps or found) or "-"


@app.command()
def show(
    episode: Annotated[str, typer.Argument(help="episode (session) id, as `traces list` prints it")],
    db: DbOption = None,
    spans: bool = typer.Option(True, "--spans/--no-spans", help="also print the raw span tree"),
    tokens: bool = typer.Option(False, "--tokens", help="print each training sequence, model tokens highlighted"),
    model: Annotated[str | None, typer.Option(help="with --tokens: the tokenizer's model (default: bundled)")] = None,
) -> None:
    """Print one episode as a readable tree: trajectories, steps, rewards, and its spans."""
    from tracerl.cli.render import episode_tree, sequences, span_tree
    from tracerl.core.convert import episode_from_spans

    with _open(db) as store:
        records = store.spans(session_id=episode)
        if not records:
            raise ConfigError(f"no spans for episode {episode!r} in {store.where}; see `tracerl traces list`")
        ep = episode_from_spans(records, episode_id=episode)
        console().print(episode_tree(ep, traceback=True))
        if tokens:
            from transformers import AutoTokenizer

            from tracerl.trainers.model_path import resolve_model

            console().print(sequences(ep, AutoTokenizer.from_pretrained(resolve_model(model))))
        if spans:
            tree: Tree = span_tree(records)
            console().print(tree)


@app.command()
def prune(
    before: Annotated[str | None, typer.Option("--before", help="episodes that ended over this long ago: 30m, 12h, 7d")] = None,
    run: Annotated[Path | None, typer.Option("--run", help="a run folder: prune its traces.db")] = None,
    db: DbOption = None,
    run_id: RunIdOption = None,
    yes: bool = typer.Option(False, "--yes", help="delete without asking (the count is printed first)"),
) -> None:
    """Delete whole episodes from a span store, in one transaction; says how many first."""
    if before is None and run is None and run_id is None:
        raise ConfigError("say what to prune: --before 7d (episodes older than that), --run DIR (a run folder's "
                          "traces) or --run-id ID (one run's episodes in a shared store)")
    if run is not None and db is not None:
        raise ConfigError("--run DIR prunes DIR/traces.db; pass --db or --run, not both")
    path = run / "traces.db" if run is not None else db
    if run is not None and not path.is_file():  # type: ignore[union-attr]
        raise ConfigError(f"--run {run}: no traces.db there")
    cutoff = parse_since(before)
    with _open(path, run_id=run_id) as store:
        episodes, spans = store.prune(before_ns=cutoff, dry_run=True)
        where = store.where + (f" of run {run_id}" if run_id else "")
        what = f"{episodes} episodes ({spans} spans) in {where}" + (f" that ended over {before} ago" if before else "")
        if not spans:
            typer.echo(f"nothing to prune: 0 episodes in {where}" + (f" ended over {before} ago" if before else ""))
            return
        typer.echo(f"pruning {what}")
        try:
            go = yes or typer.confirm("delete them?", default=False)
        except typer.Abort:  # no terminal to answer on
            go = False
        if not go:
            typer.echo("nothing deleted (pass --yes to delete without asking)")
            raise typer.Exit(1)
        episodes, spans = store.prune(before_ns=cutoff)
        typer.echo(f"deleted {episodes} episodes ({spans} spans)")


@app.command("export")
def export(
    out: Annotated[Path, typer.Argument(help="output file: .jsonl, or .parquet (needs pyarrow)")],
    db: DbOption = None,
    episode: Annotated[list[str] | None, typer.Option("--episode", help="only these episodes")] = None,
    since: SinceOption = None,
    run_id: RunIdOption = None,
    service: ServiceOption = None,
    trajectory: Annotated[str | None, typer.Option(
        "--trajectory", help="only episodes with a trajectory of this name (the agent's name, else the LangGraph "
        "node's, else main: as `traces show` prints them), each exported whole")] = None,
) -> None:
    """Export spans to JSON lines or Parquet, to train on later or move to another store.
    ``--service`` and ``--trajectory`` keep whole episodes (every span of each, the gateway's
    token spans included). Exporting nothing is an error (exit 1), and leaves ``out`` as it was."""
    since_ns = parse_since(since)
    with _open(db, run_id=run_id) as store:
        if service is not None:
            check_service(store, service)
        chosen = select_episodes(store, episodes=episode, service=service, trajectory=trajectory, since_ns=since_ns)
        tmp = out.with_name(f".{out.name}.partial")
        try:
            if out.suffix == ".parquet":
                n = write_parquet([r for records in chosen for r in records], tmp)
            else:
                n = 0
                with open(tmp, "w", encoding="utf-8") as fh:
                    for records in chosen:
                        fh.writelines(dumps_jsonl(records))
                        n += len(records)
            if n:
                tmp.replace(out)
        finally:
            tmp.unlink(missing_ok=True)
        if not n:
            raise ConfigError(_nothing_exported(store.where, episode, since, service, trajectory)
                              + f"; {out} was not written")
        typer.echo(f"exported {n} spans to {out}")


def _nothing_exported(path: str, episodes: list[str] | None, since: str | None, service: str | None = None,
                      trajectory: str | None = None) -> str:
    """Why an export found nothing, and where spans are: a run keeps its own in RUN/traces.db."""
    which = ((f" for episode {', '.join(episodes)}" if episodes else "") + (f" from the last {since}" if since else "")
             + (f" of service {service}" if service else "") + (f" with trajectory {trajectory}" if trajectory else ""))
    runs = sorted(Path("runs").glob("*/traces.db"), key=lambda p: p.stat().st_mtime, reverse=True)
    found = f" (here: {', '.join(str(p) for p in runs[:3])})" if runs else ""
    return (f"no spans{which} in {path}; a training run or tracerl eval keeps its spans in its own folder, "
            f"RUN/traces.db{found}: pass --db RUN/traces.db")


@app.command("import")
def import_(
    src: Annotated[Path, typer.Argument(help="a .jsonl or .parquet export, or an OTLP .json/.pb request body")],
    db: DbOption = None,
) -> None:
    """Import spans; the file is validated whole before anything is stored."""
    if not src.exists():
        raise ConfigError(f"no file {src}")
    with _open(db, must_exist=False) as store:
        if src.suffix == ".parquet":
            n = store.import_parquet(src)
        elif src.suffix in (".pb", ".bin") or _looks_like_otlp_json(src):
            from tracerl.core.spans import decode_otlp

            kind = "application/json" if src.suffix == ".json" else "application/x-protobuf"
            n = store.add(decode_otlp(src.read_bytes(), kind))
        else:
            n = store.import_jsonl(src)
        typer.echo(f"imported {n} new spans into {store.where} ({store.duplicates} already there)")


def _looks_like_otlp_json(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(200).lstrip()
    return head.startswith(b"{") and (b"resourceSpans" in head or b"resource_spans" in head)
