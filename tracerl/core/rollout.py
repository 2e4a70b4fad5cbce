"""The rollout API: ``tracerl.session(...)``, ``tracerl.emit_reward``, and the settings and
context an episode runs with (``@tracerl.rollout`` wraps a function around a session: :mod:`.rollout_fn`).

A session is one episode. Entering it starts a new trace whose root span
(``tracerl.episode``) carries the episode id, the task and, at the end, the termination
reason; the id also rides in W3C baggage (``tracerl.session_id``) so that every span started
inside, by us or any instrumentor, and every HTTP call that propagates baggage, is tagged
with it. Leaving the session flushes the spans and assembles the :class:`Episode` from the
span store, so an episode read live and one read later from exported traces are built by the
same converter.

    @tracerl.rollout(timeout_s=60)
    def solve(task, config):
        client = OpenAI(base_url=config.base_url, api_key=config.api_key)
        ...
        return 1.0 if correct else 0.0          # or a dict, an Episode, or None

    episode = solve(task, settings)              # always an Episode, never an exception
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry import baggage, context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode
from pydantic import BaseModel, ConfigDict, Field

from . import clients
from . import semconv as sc
from .convert import episode_from_spans
from .errors import ConfigError
from .ids import new_episode_id
from .otel import Tracing, setup_tracing
from .store import SpanStore
from .types import Episode, Task, TerminationReason

log = logging.getLogger(__name__)
# The innermost open session of this context (thread / asyncio task), so emit_reward uses
# the session's tracer provider even when it is not the global one.
_current: contextvars.ContextVar[Session | None] = contextvars.ContextVar("tracerl_session", default=None)


class RolloutSettings(BaseModel):
    """How rollouts reach the policy and where their spans go (embedded in the train config)."""

    model_config = ConfigDict(extra="forbid")

    gateway_url: str = Field(
        "http://127.0.0.1:8000", description="the tracerl gateway (or any OpenAI-compatible server) root URL"
    )
    replicas: list[str] = Field(
        default_factory=list, description="gateway replicas (root URLs): each episode is pinned to one of them, "
        "in turn, as its gateway_url (tracerl train --gateway URL ...)")
    model: str = Field("tracerl-tiny", description="model name sent in requests")
    api_key: str = Field("tracerl", description="key the agent's client sends")
    temperature: float = Field(1.0, ge=0.0, description="sampling temperature")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1, description="response length cap per call")
    timeout_s: float | None = Field(None, gt=0, description="wall-clock limit per episode")
    session_path: bool = Field(
        True, description="put the episode id in the URL path (/sessions/{id}/v1, the tracerl gateway); "
        "off for other OpenAI-compatible servers, which then get {gateway_url}/v1 and baggage only"
    )
    seed: int | None = Field(
        None, description="the episode's sampling seed: in its session URL (/sessions/{id}/seed/{seed}/v1), "
        "where the tracerl gateway samples each call without a seed of its own from seed + the call's "
        "sequence number, and offered to the agent (config.sampling['seed']); the trainer sets one per "
        "rollout so that a seeded run samples the same tokens whatever the thread timing"
    )
    store: str | None = Field(None, description="span store: a path or postgresql:// URL (default $TRACERL_STORE, "
                              "else $TRACERL_HOME/traces.db)")
    run_id: str | None = Field(None, description="the run these episodes belong to, on every span (tracerl.run.id)")
    otlp_endpoint: str | None = Field(None, description="also export spans to this OTLP/HTTP endpoint")


@dataclass
class RolloutContext:
    """What the user's rollout function receives for one episode: where its session is, the
    model name and the sampling settings, and clients bound to the session's URL.

    Use the client helpers rather than building a client per episode: they share one TLS
    context and connection pool for the process (see :mod:`tracerl.core.clients`; a new
    client costs ~17 ms of CPU, more than a small agent's whole episode)."""

    episode_id: str
    task: Task
    base_url: str
    model: str
    api_key: str
    sampling: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None  # the episode's wall-clock limit: the helpers' clients read for as long

    def openai_kwargs(self) -> dict[str, str]:
        """``base_url`` and ``api_key`` for a client you build yourself."""
        return {"base_url": self.base_url, "api_key": self.api_key}

    def openai_client(self, **options: Any) -> Any:
        """An ``openai.OpenAI`` client for this episode's session (``options`` go to it)."""
        return clients.openai_client(self.base_url, self.api_key, timeout_s=self.timeout_s, **options)

    def async_openai_client(self, **options: Any) -> Any:
        """An ``openai.AsyncOpenAI`` client for this episode's session, e.g. for the Agents
        SDK's ``OpenAIResponsesModel(model=..., openai_client=config.async_openai_client())``."""
        return clients.async_openai_client(self.base_url, self.api_key, timeout_s=self.timeout_s, **options)

    def chat_openai(self, **options: Any) -> Any:
        """LangChain's ``ChatOpenAI`` for this episode: this model, temperature, top_p and
        max_tokens unless ``options`` say otherwise (``langchain-openai`` must be installed).
        The seed is left out: one seed for every call of an episode would draw the same random
        numbers each call; the tracerl gateway seeds each call of a seeded session itself."""
        return clients.chat_openai(self.base_url, self.api_key, timeout_s=self.timeout_s,
                                   **{**self._langchain_defaults(), **options})

    def _langchain_defaults(self) -> dict[str, Any]:
        defaults: dict[str, Any] = {"model": self.model}
        for key in ("temperature", "top_p", "max_tokens"):
            if self.sampling.get(key) is not None:
                defaults[key] = self.sampling[key]
        return defaults

    def anthropic_client(self, **options: Any) -> Any:
        """An ``anthropic.Anthropic`` client for this episode's session: the gateway serves
        Anthropic's Messages API beside OpenAI's (``anthropic`` must be installed)."""
        return clients.anthropic_client(self.base_url, self.api_key, timeout_s=self.timeout_s, **options)

    def async_anthropic_client(self, **options: Any) -> Any:
        """An ``anthropic.AsyncAnthropic`` client for this episode's session."""
        return clients.async_anthropic_client(self.base_url, self.api_key, timeout_s=self.timeout_s, **options)

    def chat_anthropic(self, **options: Any) -> Any:
        """LangChain's ``ChatAnthropic`` for this episode, with this model and its sampling
        settings as :meth:`chat_openai` (``langchain-anthropic`` must be installed)."""
        return clients.chat_anthropic(self.base_url, self.api_key, timeout_s=self.timeout_s,
                                      **{**self._langchain_defaults(), **options})

    def anthropic_kwargs(self, max_tokens: int = 1024) -> dict[str, Any]:
        """``client.messages.create(**config.anthropic_kwargs(), messages=...)``: this model,
        ``max_tokens`` (the Messages API requires it: the episode's cap, else ``max_tokens``) and
        the sampling settings in ``extra_body`` (the anthropic SDK 2.x takes no temperature
        argument; the gateway reads them from the body, as vLLM's extras)."""
        extra = {k: self.sampling[k] for k in ("temperature", "top_p", "seed") if self.sampling.get(k) is not None}
        return {"model": self.model, "max_tokens": self.sampling.get("max_tokens") or max_tokens, "extra_body": extra}

    @property
    def anthropic_base_url(self) -> str:
        """This session's URL for Anthropic clients and harnesses (``ANTHROPIC_BASE_URL``)."""
        return clients.anthropic_base_url(self.base_url)

    def litellm_kwargs(self) -> dict[str, Any]:
        """``litellm.completion(**config.litellm_kwargs(), messages=...)``: this episode's
        model through the OpenAI provider, on the shared pool, with its sampling settings
        (use ``litellm.acompletion`` with :meth:`async_openai_client` as ``client``)."""
        return {"model": f"openai/{self.model}", "api_base": self.base_url, "api_key": self.api_key,
                "client": self.openai_client(), **self.sampling}


RolloutConfig = RolloutContext  # the name before 0.2; kept for one release


def session_base_url(gateway_url: str, episode_id: str, seed: int | None = None) -> str:
    """``{gateway}/sessions/{id}/v1``: the session rides in the path, so any client works; with
    a ``seed``, ``{gateway}/sessions/{id}/seed/{seed}/v1``, which the gateway seeds each call of
    the session from (see tracerl.gateway.app.session_seed)."""
    root = gateway_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return f"{root}/sessions/{episode_id}" + (f"/seed/{seed}" if seed is not None else "") + "/v1"


class Session:
    """One episode as a context manager (sync or async). ``episode()`` assembles it after exit."""

    def __init__(
        self,
        episode_id: str | None = None,
        task: Task | dict[str, Any] | None = None,
        *,
        settings: RolloutSettings | None = None,
        tracing: Tracing | None = None,
        attributes: Mapping[str, Any] | None = None,
    ):
        self.settings = settings or RolloutSettings()
        self.attributes = dict(attributes or {})  # more on the episode span (the trainer's episode kind)
        self.episode_id = episode_id or new_episode_id()  # time-ordered: cheaper to index
        if "/" in self.episode_id or not self.episode_id.strip():
            raise ConfigError(f"episode id {self.episode_id!r} must be non-empty and contain no '/'")
        self.task = task if isinstance(task, Task) or task is None else Task.model_validate(task)
        self._tracing = tracing
        self._span: trace.Span | None = None
        self._ctx: Context | None = None
        self._token: object | None = None
        self._session_token: contextvars.Token[Session | None] | None = None
        self.termination_reason: TerminationReason | None = None
        self.error: str | None = None
        self.traceback: str | None = None  # the agent's exception's, when it raised
        self.otlp_only = False  # its spans leave over the tracing's OTLP exporter only (a rollout worker's)
        # opened by a framework's top-level run, no session being open (tracerl.core.record)
        self.app_run = sc.EPISODE_SOURCE in self.attributes
        self.ended_at: float | None = None  # time.monotonic() when it ended
        self._where: tuple[int, int] | None = None  # the thread and task it was entered in

    @property
    def base_url(self) -> str:
        if not self.settings.session_path:
            root = self.settings.gateway_url.rstrip("/")
            return root if root.endswith("/v1") else f"{root}/v1"
        return session_base_url(self.settings.gateway_url, self.episode_id, self.settings.seed)

    @property
    def tracing(self) -> Tracing:
        if self._tracing is None:
            # A session that names its store needs no shared one: its spans go to its own.
            self._tracing = setup_tracing(otlp_endpoint=self.settings.otlp_endpoint,
                                          use_store=self.settings.store is None)
        return self._tracing

    def _store(self) -> SpanStore:
        if self.settings.store is not None:
            return self.tracing.store(self.settings.store)
        store = self.tracing.default_store()
        if store is None:
            raise ConfigError(
                f"episode {self.episode_id}: its tracing has no span store to read the episode from; "
                "set RolloutSettings(store=...) or pass a Tracing set up with a store",
                episode_id=self.episode_id,
            )
        return store

    def config(self) -> RolloutContext:
        sampling: dict[str, Any] = {"temperature": self.settings.temperature, "top_p": self.settings.top_p}
        if self.settings.max_tokens is not None:
            sampling["max_tokens"] = self.settings.max_tokens
        if self.settings.seed is not None:
            sampling["seed"] = self.settings.seed
        return RolloutContext(
            episode_id=self.episode_id,
            task=self.task or Task(id=self.episode_id),
            base_url=self.base_url,
            model=self.settings.model,
            api_key=self.settings.api_key,
            sampling=sampling,
        )

    def __enter__(self) -> Session:
        ctx = self._baggage()
        attrs: dict[str, Any] = {**self.attributes, sc.SPAN_TYPE: "episode", sc.SESSION_ID: self.episode_id}
        if self.settings.run_id:
            attrs[sc.RUN_ID] = self.settings.run_id
        if self.task is not None:
            attrs[sc.TASK_ID] = self.task.id
            attrs[sc.TASK_JSON] = self.task.model_dump_json()
        self._span = self.tracing.tracer(__name__).start_span(
            "tracerl.episode", context=ctx, attributes=attrs
        )
        trace_id = format(self._span.get_span_context().trace_id, "032x")
        if self.settings.store is not None:  # this episode's spans go to its store only
            self.tracing.claim([self.episode_id, trace_id], self.settings.store)
        elif self.otlp_only:
            self.tracing.claim_for_otlp([self.episode_id, trace_id])
        self._ctx = ctx
        self._token = context.attach(trace.set_span_in_context(self._span, ctx))
        self._session_token = _current.set(self)
        self._where = _here()
        return self

    def _baggage(self) -> Context:
        # A fresh Context: each episode is its own trace even when called under an app span. The
        # session and run ids ride in baggage, and SessionSpanProcessor puts them on every span.
        ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, self.episode_id, context=Context())
        if self.settings.run_id:
            ctx = baggage.set_baggage(sc.BAGGAGE_RUN_KEY, self.settings.run_id, context=ctx)
        return ctx

    def resume(self, trace_id: str, span_id: str) -> Session:
        """This session, run in another process (a rollout worker), as seen here: its context
        (baggage, and the episode span of that process as the parent) for what is recorded after
        it, its grading; its spans go to this session's store."""
        parent = trace.SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                                   trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
        self._span, self._ctx = trace.NonRecordingSpan(parent), self._baggage()
        if self.settings.store is not None:
            self.tracing.claim([self.episode_id, trace_id], self.settings.store)
        return self

    def set_attribute(self, key: str, value: Any) -> None:
        """An attribute on the episode's span (while the session is open)."""
        if self._span is not None:
            self._span.set_attribute(key, value)

    @contextlib.contextmanager
    def reopened(self) -> Iterator[trace.Tracer]:
        """The session's context again after it ended (its baggage, its span as the parent), to
        record what comes after the agent, its grading; yields the session's tracer."""
        token = context.attach(trace.set_span_in_context(self._span, self._ctx)) if self._span is not None else None
        session_token = _current.set(self)
        try:
            yield self.tracing.tracer(__name__)
        finally:
            _current.reset(session_token)
            if token is not None:
                context.detach(token)

    def end(self, reason: TerminationReason, error: str | None = None) -> None:
        """Record how the episode ended (the first call wins)."""
        if self.termination_reason is None:
            self.termination_reason, self.error = reason, error

    def attached_here(self) -> bool:
        """Whether this is the thread (and asyncio task) the session was entered in, with its
        context still current: where :meth:`release` may restore the context before it."""
        return self._token is not None and self._where == _here() and _current.get() is self

    def release(self) -> None:
        """Restore the context this session was entered in (call it there, as ``__exit__`` does)."""
        if self._token is not None:
            context.detach(self._token)  # type: ignore[arg-type]
            if self._session_token is not None:
                _current.reset(self._session_token)
            self._token = self._session_token = None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is not None:
            self.end(_reason_for(exc), f"{type(exc).__name__}: {exc}")
            self.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        span = self._span
        if span is not None:
            if self.termination_reason is not None:
                span.set_attribute(sc.TERMINATION_REASON, self.termination_reason.value)
            if exc is not None:  # an ``exception`` event with the stack trace, as the SDK records one
                span.record_exception(exc)
            if self.error:
                span.set_attribute(sc.EPISODE_ERROR, self.error[:4000])
                span.set_status(Status(StatusCode.ERROR, self.error[:200]))
            span.end()
        self.ended_at = time.monotonic()
        # An app run may end on another thread (LiteLLM reports there): its context stays current
        # where it began, ended, until the next run there releases it (tracerl.core.record).
        if not self.app_run or self.attached_here():
            self.release()
        return False

    async def __aenter__(self) -> Session:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> Literal[False]:
        return self.__exit__(*exc)

    def episode(self) -> Episode:
        """Flush spans and build the Episode from the store (call after the block ends)."""
        self.tracing.flush()
        store = self._store()
        ep = episode_from_spans(store.spans(session_id=self.episode_id), episode_id=self.episode_id, task=self.task)
        return ended(ep, self.termination_reason, self.error, self.traceback)


def _here() -> tuple[int, int]:
    """This thread and asyncio task (0 outside one)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        task = None
    return threading.get_ident(), id(task) if task is not None else 0


def ended(ep: Episode, reason: TerminationReason | None, error: str | None, tb: str | None) -> Episode:
    """``ep`` with how its session ended, where that was not success: what the session knows
    (an exception, a timeout) even where its spans do not say it."""
    if reason is not None and reason is not TerminationReason.SUCCESS:
        ep.termination_reason, ep.error = reason, error
        ep.traceback = ep.traceback or tb
    return ep


def _reason_for(exc: BaseException) -> TerminationReason:
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)):
        return TerminationReason.TIMEOUT
    if isinstance(exc, asyncio.CancelledError):
        return TerminationReason.CANCELLED
    return TerminationReason.ERROR


def session(
    episode_id: str | None = None,
    task: Task | dict[str, Any] | None = None,
    *,
    settings: RolloutSettings | None = None,
    tracing: Tracing | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Session:
    """Open an episode for code that is not one function: ``with tracerl.session() as s: ...``.
    ``attributes`` go on the episode's root span."""
    return Session(episode_id, task, settings=settings, tracing=tracing, attributes=attributes)
