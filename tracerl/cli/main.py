"""The ``tracerl`` command. Commands stay thin: parse, call a library function, print."""

from __future__ import annotations

import sys

import typer

from tracerl.cli import serve, traces
from tracerl.cli import train as train_cli

app = typer.Typer(
    help=(
        "tracerl: train LLM agents with reinforcement learning from their OpenTelemetry traces.\n\n"
        "Instrument an agent (any framework), let its LLM calls become spans in a span store, "
        "turn the spans into episodes, and train on them.\n\n"
        "  tracerl train arithmetic        RL on the bundled tiny model (CPU, minutes)\n\n"
        "  tracerl eval arithmetic         accuracy and pass@k of an agent on a task\n\n"
        "  tracerl traces list             what your agents recorded\n\n"
        "  tracerl gateway serve           serve a policy with token-level recording"
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command("train")(train_cli.train)
app.command("eval")(train_cli.evaluate)
app.add_typer(train_cli.tasks_app, name="tasks")
app.add_typer(traces.app, name="traces")
app.add_typer(serve.gateway_app, name="gateway")
app.add_typer(serve.model_app, name="model")


def main(argv: list[str] | None = None) -> int:
    """Entry point: a TracerlError becomes one readable line on stderr and exit code 1."""
    from pydantic import ValidationError

    from tracerl.core.errors import TracerlError

    try:
        app(args=argv, standalone_mode=False)
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
    except Exception as exc:  # click's usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
