"""``tracerl tasks list | show | check | dedup``: the task registry and the benchmark catalogue."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

app = typer.Typer(help="The task registry: what can be trained and evaluated.", no_args_is_help=True)

PathOption = Annotated[str | None, typer.Option(
    "--path", help="local data: a folder with NAME/<split>.jsonl|.parquet (as TRACERL_DATA_DIR), or one file")]


def _spec(name: str) -> Any:
    from tracerl import tasks

    return tasks.get(name)


def _source_line(spec: Any) -> str:
    hub = getattr(spec.source, "hub", None)
    if hub is None:
        return "generated (no data needed)" if spec.domain != "user" else "your data"
    configs = [c for c in hub.configs if c]
    return hub.id + (f" ({', '.join(configs)})" if configs else "")


def _splits(spec: Any) -> str:
    """A task's roles with the hub split each reads and its declared size: "train: train (7,473)"."""
    source = spec.source
    hub = getattr(source, "hub", None)
    if hub is None:
        return "train, test (generated)" if spec.domain in ("synthetic", "games") else "train, test"
    parts = []
    for role, split, size in source.roles():
        share = "" if not source.shared_split else " x0.8" if role == "train" else " x0.2"
        parts.append(f"{role}: {split} ({size:,}{share})" if size else f"{role}: {split}")
    return "; ".join(parts)


def markdown(specs: list[Any]) -> str:
    """The catalogue as a Markdown table (docs/benchmarks.md holds this, kept equal by a test)."""
    lines = ["| task | domain | dataset | splits (hub split, declared rows) | grader | tools |",
             "| --- | --- | --- | --- | --- | --- |"]
    for spec in sorted(specs, key=lambda s: (s.domain, s.name)):
        hub = getattr(spec.source, "hub", None)
        if hub is not None:
            configs = [c for c in hub.configs if c]
            shown = f"{hub.id}" + (f" ({', '.join(configs)})" if len(configs) == 1 else
                                   f" ({len(configs)} configs)" if configs else "")
            dataset = f"[{shown}](https://huggingface.co/datasets/{hub.id})"
        else:
            dataset = "built-in task folders" if spec.domain == "terminal" else "generated"
        grader = (getattr(spec.source, "grader", "") or "its own reward").replace("|", "\\|")
        tools = ", ".join(getattr(spec.source, "tool_names", ()) or ()) or "-"
        lines.append(f"| {spec.name} | {spec.domain} | {dataset} | {_splits(spec)} | {grader} | {tools} |")
    return "\n".join(lines) + "\n"


@app.command("list")
def list_tasks(
    domain: Annotated[str | None, typer.Option(help="only this domain (math, code, finance, ...)")] = None,
    as_markdown: Annotated[bool, typer.Option("--markdown", help="print the catalogue as a Markdown table")] = False,
) -> None:
    """Registered tasks: domain, where the data comes from, the splits it has, what it is."""
    from rich.console import Console
    from rich.table import Table

    from tracerl import tasks
    from tracerl.core.errors import ConfigError

    specs = [tasks.get(name) for name in tasks.names()]
    domains = sorted({s.domain for s in specs})
    if domain is not None and domain not in domains:
        raise ConfigError(f"no task has domain {domain!r}; the domains are: {', '.join(domains)}")
    if as_markdown:
        print(markdown([s for s in specs if domain is None or s.domain == domain]), end="")
        return
    table = Table("task", "domain", "source", "splits", "description")
    shown = 0
    for spec in sorted(specs, key=lambda s: (s.domain, s.name)):
        if domain is not None and spec.domain != domain:
            continue
        splits = getattr(spec.source, "splits", None) or {"train": "", "test": ""}
        table.add_row(spec.name, spec.domain, _source_line(spec), "/".join(sorted(splits, reverse=True)),
                      spec.description)
        shown += 1
    Console().print(table)
    print(f"{shown} tasks" + (f" in {domain}" if domain else f" in {len(domains)} domains"))


def _sample_task(spec: Any, path: str | None) -> tuple[Any | None, str]:
    """A task to show the prompt of, from the data wherever the loader finds it (``path``,
    ``$TRACERL_DATA_DIR``, the HF cache or the hub), or why there is none."""
    from tracerl.core.errors import ConfigError

    split = "test" if "test" in getattr(spec.source, "splits", {"test": ""}) else "train"
    try:
        found = spec.tasks(split, 1, seed=0, path=path) if path else spec.tasks(split, 1, seed=0)
    except ConfigError as exc:
        return None, str(exc)
    return (found[0], f"the {split} split's first task (seed 0)") if found else (None, "the split is empty")


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="a task name (tracerl tasks list)")],
    path: PathOption = None,
    sample: Annotated[bool, typer.Option(help="load the data to show a sample prompt (the hub's split is "
                                               "downloaded when it is not local or cached)")] = True,
) -> None:
    """Where a task's data comes from, its split sizes, its grader, its tools and a sample prompt."""
    spec = _spec(name)
    source = spec.source
    print(f"{spec.name}: {spec.description}")
    print(f"  domain   {spec.domain}")
    print(f"  source   {_source_line(spec)}")
    hub = getattr(source, "hub", None)
    if hub is not None:
        declared = source.declared()
        print(f"  card     {declared.card} (revision {declared.revision}, read from the {declared.source})")
        roles = [f"{role} = hub split '{split}'" + (f" ({size:,} rows)" if size else "")
                 for role, split, size in source.roles()]
        print(f"  splits   {'; '.join(roles)}" + ("; one hub split, 80/20 by row hash" if source.shared_split else ""))
        print(f"  columns  {', '.join(declared.features(hub.configs[0]))}")
    grader = getattr(source, "grader", "") or "the task's own reward"
    print(f"  grader   {grader}")
    tools = getattr(source, "tool_names", ()) or ()
    print(f"  tools    {', '.join(tools) if tools else 'none'}")
    print(f"  agent    {spec.default_agent}")
    if not sample:
        return
    task, whence = _sample_task(spec, path)
    if task is None:
        print(f"  sample   none: {whence}")
        return
    print(f"  sample   {whence}:")
    for message in spec.messages(task):
        content = str(message.get("content") or "")
        cut = content if len(content) <= 600 else content[:600] + f" ... ({len(content):,} characters)"
        print(f"    [{message['role']}] " + cut.replace("\n", "\n      "))


def _check_terminal(spec: Any, split: str | None, n: int, path: str | None) -> None:
    """Every terminal task's solution.sh must pass its test.sh, and doing nothing must not (as
    Terminal-Bench checks its tasks); ``path`` checks a folder of task folders of your own."""
    from tracerl.tasks.terminal import _split_of, read_tasks
    from tracerl.tasks.terminal.environment import check as check_task

    found = read_tasks(path) if path else spec.source.all()
    found = [t for t in found if split is None or _split_of(t) == split][:n]
    bad = []
    for task in found:
        if task.script("solution.sh") is None:
            bad.append(f"{task.name}: no solution.sh to check its test.sh against")
            continue
        solved, idle = check_task(task)
        if not solved:
            bad.append(f"{task.name}: test.sh fails after solution.sh")
        if idle:
            bad.append(f"{task.name}: test.sh passes after doing nothing")
    where = path or spec.name
    print(f"{where}{f' {split}' if split else ''}: {len(found)} tasks; {len(found) - len({b.split(':')[0] for b in bad})}"
          " solved by their solution.sh and not by doing nothing" + (f", {len(bad)} problems:" if bad else ""))
    for line in bad:
        print(f"  {line}")
    if bad:
        raise typer.Exit(1)


@app.command("check")
def check(
    name: Annotated[str, typer.Argument(help="a catalogue benchmark or a terminal task set")],
    split: Annotated[str | None, typer.Option(
        help="train or test (default: test for a benchmark, every task for terminal tasks)")] = None,
    n: Annotated[int, typer.Option(min=1, help="at most this many rows")] = 100_000,
    path: PathOption = None,
) -> None:
    """Grade each row's reference solution: every row a grader cannot score 1 is a broken row
    (or a grader bug), named with its id; a terminal task's solution.sh must pass its tests and
    doing nothing must not. Exit 1 when any fails."""
    from tracerl.core.errors import ConfigError

    spec = _spec(name)
    if split not in (None, "train", "test"):
        raise ConfigError(f"--split {split!r}: choose train or test")
    if spec.domain == "terminal":
        _check_terminal(spec, split, n, path)
        return
    split = split or "test"
    if not hasattr(spec.source, "solution"):
        raise ConfigError(f"{name} is not a catalogue benchmark; check runs on those (tracerl tasks list)")
    rows = spec.source.rows(split, path)[:n]
    found = [spec.source.to_task(row, split) for row in rows]
    bad, unsolvable = [], 0
    for task in found:
        reply = spec.source.solution(task)
        if reply is None:
            unsolvable += 1
        elif not spec.is_correct(task, reply):
            bad.append(task.id)
    print(f"{name} {split}: {len(found)} rows; {len(found) - len(bad) - unsolvable} scored 1 by their reference, "
          f"{len(bad)} not" + (f", {unsolvable} with no reference solution to try" if unsolvable else ""))
    for task_id in bad[:20]:
        print(f"  not solved by its reference: {task_id}")
    if bad:
        raise typer.Exit(1)


@app.command("dedup")
def dedup(
    path: PathOption = None,
    after: Annotated[bool, typer.Option(help="check the train rows as runs get them (same-domain copies "
                                             "already dropped): any line left is a copy no run drops")] = False,
) -> None:
    """Train rows of the catalogue that are test problems of any catalogue benchmark."""
    from collections import Counter

    from tracerl.tasks.dedup import check_catalogue

    checked = check_catalogue(path or os.environ.get("TRACERL_DATA_DIR"), after_dedup=after)
    found, missing = checked.found, checked.missing
    pairs = Counter((o.train, o.test, o.dropped) for o in found)
    for (train, test, dropped), count in sorted(pairs.items()):
        note = "dropped when loading" if dropped else "kept: another domain, drop it yourself"
        example = next(o for o in found if (o.train, o.test) == (train, test))
        print(f"{train} train: {count} rows are {test} test problems ({note}; e.g. {example.train_id} = "
              f"{example.test_id})")
    rows, problems = sum(checked.train_rows.values()), sum(checked.test_problems.values())
    compared = (f"{rows:,} train rows of {len(checked.train_rows)} benchmarks against {problems:,} test problems "
                f"of {len(checked.test_problems)} benchmarks" + (" (after the loaders' dedup)" if after else ""))
    if not rows or not problems:
        print(f"nothing checked: {compared}; no data reachable here (pass --path or set TRACERL_DATA_DIR to a "
              "folder with the benchmarks' NAME/train and NAME/test files, or fill the HF cache)")
    elif not pairs:
        print(f"no train row is a test problem: compared {compared}")
    else:
        print(f"compared {compared}")
    if missing:
        print(f"not checked (data not reachable here): {', '.join(missing)}")
