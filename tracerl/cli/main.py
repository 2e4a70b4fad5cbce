"""The ``tracerl`` command. Commands stay thin: parse, call a library function, print."""

from __future__ import annotations

import sys

import typer

from tracerl.cli import init as init_cli
from tracerl.cli import runs as runs_cli
from tracerl.cli import serve, traces
from tracerl.cli import tasks as tasks_cli
from tracerl.cli import train as train_cli

app = typer.Typer(
    help=(
        "tracerl: train LLM agents with reinforcement learning from their OpenTelemetry traces.\n\n"
        "Instrument an agent (any framework), let its LLM calls become spans in a span store, "
        "turn the spans into episodes, and train on them.\n\n"
        "  tracerl init my-agent           a project to start from: app, tasks, reward, config\n\n"
        "  tracerl train --data tasks.jsonl --agent app.py:solve --reward reward.py:grade\n\n"
        "  tracerl eval --data tasks.jsonl --agent app.py:solve --reward math\n\n"
        "  tracerl train arithmetic        RL on a built-in task with the bundled tiny model\n\n"
        "  tracerl traces list             what your agents recorded\n\n"
        "  tracerl dashboard runs/demo     watch a run learn; tracerl diagnose runs/demo: why rewards were zero\n\n"
        "  tracerl gateway serve           serve a policy with token-level recording"
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command("init")(init_cli.init)
app.command("train")(train_cli.train)
app.command("eval")(train_cli.evaluate)
app.add_typer(tasks_cli.app, name="tasks")
app.add_typer(traces.app, name="traces")
app.add_typer(serve.gateway_app, name="gateway")
app.add_typer(serve.model_app, name="model")
app.command("dashboard")(runs_cli.dashboard)
app.command("diagnose")(runs_cli.diagnose)
app.command("report")(runs_cli.report)
app.add_typer(runs_cli.runs_app, name="runs")


def main(argv: list[str] | None = None) -> int:
    """Entry point: a TracerlError becomes one readable line on stderr and exit code 1; a usage
    error prints click's usage, hint and error and exits 2, as click's standalone mode does."""
    from pydantic import ValidationError

    from tracerl.core.errors import TracerlError

    try:
        code = app(args=argv, prog_name="tracerl", standalone_mode=False)
    except TracerlError as exc:
        print(f"tracerl: error: {exc}", file=sys.stderr)
        return 1
    except ValidationError as exc:  # a bad setting: name the field and the rule, on one line
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or exc.title
        got = f" (got {first.get('input')!r})" if first.get("loc") else ""
        print(f"tracerl: error: {where}: {first.get('msg')}{got}", file=sys.stderr)
        return 1
    except typer.Abort:
        return 130
    except SystemExit as exc:  # --help and friends
        return int(exc.code or 0)
    except _CLICK_ERROR as exc:  # non-standalone mode hands usage errors to us
        return _show_usage_error(exc)
    # Non-standalone typer returns the code of a typer.Exit (130 for a Ctrl-C it caught),
    # else the command's return value (None for all of ours).
    return code if isinstance(code, int) else 0


def _click_error_class() -> type[Exception]:
    """click's ClickException as typer uses it: typer >= 0.24 vendors click (typer._click), so
    ``click.ClickException`` does not match its errors; typer.BadParameter derives from the
    ClickException of whichever click typer runs on."""
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == "ClickException":
            return cls
    import click  # pragma: no cover - a typer whose BadParameter is not a ClickException

    return click.ClickException


_CLICK_ERROR = _click_error_class()


def _show_usage_error(exc: Exception) -> int:
    """A bad value (``--n 0``) is one line naming the option and the rule; anything else (an
    unknown option or command, a missing argument) gets click's usage and hint too."""
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, typer.BadParameter) and type(exc).__name__ == "BadParameter" and ctx is not None:
        print(f"Error: {exc.format_message()} (see '{ctx.command_path} --help')", file=sys.stderr)
    else:
        exc.show()  # type: ignore[attr-defined]
    return int(getattr(exc, "exit_code", 2))


if __name__ == "__main__":
    sys.exit(main())
