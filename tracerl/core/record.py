"""What an app records into its episode: rewards, the task, tool calls, and the episode a
framework's top-level run opens when no session is open.

**One run of the app, one episode.** Inside ``tracerl.session(...)`` (and every rollout the
trainer or ``tracerl eval`` runs) the session is the episode. Outside one, an instrumented
framework's top-level run opens it::

    tracerl.instrument("langgraph")          # the one line
    result = graph.invoke({"messages": [...]})   # opens and ends one episode
    tracerl.set_task({"id": "q-17", "answer": "42"})   # optional: attaches to that episode
    tracerl.emit_reward(1.0 if ok(result) else 0.0)     # attaches to that episode

    app run ─┬─ graph.invoke / chain.invoke / Runner.run / bare llm.invoke / litellm.completion
             │     └─ tracerl.episode  (tracerl.episode.source = the framework)
             │           ├─ chat ... ── gateway span (token ids, by W3C context)
             │           └─ execute_tool ...
             └─ emit_reward / set_task just after it, same thread or task ─► the same episode

The top-level runs are: a LangChain runnable (a LangGraph graph, a chain) or chat model
invoked outside any other runnable, an Agents SDK trace (``Runner.run``, or several runs
under one ``agents.trace(...)``), and a LiteLLM call. Nested runs join their parent's episode.
A reward or task recorded after the run attaches to the episode that run opened when it comes
from the same thread or asyncio task within :data:`ATTACH_WINDOW_S` seconds (the next run
there replaces it); later or elsewhere, pass ``episode_id=`` (from :func:`episode_id` taken
just after the run). A reward with no episode to go to is not recorded (it would be an episode
of its own, with no LLM call): a warning says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import baggage, context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from . import _json
from . import semconv as sc
from .ids import row_id
from .otel import Tracing, get_tracer
from .rollout import Session, _current
from .types import Task

log = logging.getLogger(__name__)

ATTACH_WINDOW_S = 600.0
"""How long after an app run ended a reward or task from the same thread or task joins it."""

# The episode an app run opened and ended last in this context (thread / asyncio task), and
# per thread for code outside any task: ``Runner.run_sync`` runs its trace in a task of the
# caller's thread, and the caller's reward comes after, outside it.
_ended: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "tracerl_ended_app_episode", default=None)
_ended_in_thread: dict[int, Session] = {}


# -- the episode of a framework's run ----------------------------------------------------


def in_episode() -> bool:
    """Whether this context already belongs to an open episode: a session, or a session id in
    W3C baggage (a caller's, propagated into this process)."""
    sess = _current.get()
    if sess is not None:
        return sess.ended_at is None
    return baggage.get_baggage(sc.BAGGAGE_SESSION_KEY) is not None


def inside_session() -> bool:
    """Whether an explicit session (``tracerl.session``, a rollout) is open here: a framework's
    runs below it open nothing, so an adapter may skip their events."""
    sess = _current.get()
    return sess is not None and sess.ended_at is None and not sess.app_run


def open_app_episode(tracing: Tracing, framework: str, name: str) -> Session | None:
    """Open the episode of a framework's top-level run (``framework``: the adapter's name),
    unless this context already belongs to one (then None). Made current in this context;
    :func:`close_app_episode` ends it."""
    stale = _current.get()
    if stale is not None and stale.app_run and stale.attached_here() and (
            stale.ended_at is not None or stale.attributes.get(sc.EPISODE_SOURCE) == framework):
        # an app run that ends elsewhere (LiteLLM reports on a worker thread, maybe not yet): its
        # context stayed current here; a new run of the same framework here is the next episode
        stale.release()
    if in_episode():
        return None
    sess = Session(tracing=tracing, attributes={sc.EPISODE_SOURCE: framework, sc.EPISODE_NAME: name})
    sess.__enter__()
    return sess


def close_app_episode(sess: Session, error: BaseException | None = None) -> None:
    """End the run's episode; a reward or task recorded next in this context attaches to it."""
    try:
        sess.__exit__(None if error is None else type(error), error, None)
    except Exception:  # never into the framework
        log.debug("tracerl: could not end an app run's episode", exc_info=True)
    _ended.set(sess)
    if len(_ended_in_thread) > 4096:  # threads come and go: keep the map bounded
        _ended_in_thread.clear()
    _ended_in_thread[threading.get_ident()] = sess


@contextlib.contextmanager
def app_run(name: str = "app") -> Iterator[str | None]:
    """One episode for a run of the app that no framework run covers (a loop of LiteLLM or plain
    OpenAI calls): opened here unless this context already belongs to one (inside a rollout, a
    session or a framework's run it joins that, and yields None), ended on leaving; a reward
    or task just after it attaches to it. Yields the episode id::

        with tracerl.app_run("support-bot"):
            reply = my_loop(question)
        tracerl.emit_reward(score(reply))
    """
    from .otel import setup_tracing

    sess = open_app_episode(setup_tracing(), "app", name)
    error: BaseException | None = None
    try:
        yield None if sess is None else sess.episode_id
    except BaseException as exc:
        error = exc
        raise
    finally:
        if sess is not None:
            close_app_episode(sess, error)


def _target() -> Session | None:
    """The session a reward or task goes to: the open one, else the app run that ended here
    last (in this task; outside any task, in this thread), within the window."""
    sess = _current.get()
    if sess is None:  # in a task, the run that ended in it; else the one that ended last in this thread
        sess = _ended.get() if _in_task() else _ended_in_thread.get(threading.get_ident())
    if sess is None or sess.ended_at is None:
        return sess
    return sess if time.monotonic() - sess.ended_at <= ATTACH_WINDOW_S else None


def _in_task() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no running loop
        return False


def episode_id() -> str | None:
    """The id of the episode open here, else of the app run that just ended here (within the
    window), else None: keep it to reward the episode later (``emit_reward(..., episode_id=)``)."""
    sess = _target()
    if sess is not None or _current.get() is not None:
        return None if sess is None else sess.episode_id
    found = baggage.get_baggage(sc.BAGGAGE_SESSION_KEY)  # a caller's session, propagated here
    return None if found is None else str(found)


@contextlib.contextmanager
def _recording(caller: str, episode: str | None) -> Iterator[trace.Tracer | None]:
    """The tracer to record ``caller``'s span with, in the context of the episode it belongs
    to; None (and a warning) when it belongs to none."""
    if episode is not None:  # a named episode: its id in baggage puts the span in it
        token = context.attach(baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, episode, context=Context()))
        try:
            yield get_tracer()
        finally:
            context.detach(token)
        return
    sess = _target()
    if sess is not None and _current.get() is sess:  # open, or ended with its context still current
        yield sess.tracing.tracer()
    elif sess is not None:  # the app run that just ended here
        with sess.reopened() as tracer:
            yield tracer
    elif _current.get() is None and (in_episode() or trace.get_current_span().get_span_context().is_valid):
        yield session_tracer(caller)  # a propagated session, or the app's own trace: it joins that
    else:
        log.warning("tracerl.%s: no episode is open here and no app run ended here in the last %.0f s, so "
                    "nothing was recorded (it would be an episode of its own, with no LLM call); call it "
                    "inside tracerl.session(...), just after the instrumented run in the same thread or task, "
                    "or pass episode_id=tracerl.episode_id() taken after the run", caller, ATTACH_WINDOW_S)
        yield None


def emit_reward(
    value: float,
    name: str = "reward",
    step: bool | int = False,
    *,
    agent: str | None = None,
    is_correct: bool | None = None,
    episode_id: str | None = None,
) -> None:
    """Record a reward for the current episode as a ``tracerl.reward`` span.

    The episode is the open session, else the app run that just ended in this thread or task
    (see the module docstring), else ``episode_id``. ``step=True`` rewards the LLM call just
    made (a per-step reward); an int names the gateway sequence number of the step. ``agent``
    makes a final reward one agent's (e.g. the judge's) instead of the episode's. Works in
    production apps: the reward travels with the trace, to be trained on later
    (``tracerl train --from-traces``).
    """
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"reward {name!r} is NaN; emit a finite number")
    attrs: dict[str, Any] = {
        sc.SPAN_TYPE: "reward",
        sc.REWARD_VALUE: value,
        sc.REWARD_NAME: name,
        sc.REWARD_SCOPE: "step" if step is not False else "episode",
    }
    if not isinstance(step, bool):
        attrs[sc.REWARD_STEP] = int(step)
    if agent:
        attrs[sc.REWARD_AGENT] = agent
    if is_correct is not None:
        attrs[sc.REWARD_IS_CORRECT] = bool(is_correct)
    with _recording("emit_reward", episode_id) as tracer:
        if tracer is not None:
            tracer.start_span("tracerl.reward", attributes=attrs).end()


def set_task(task: Task | Mapping[str, Any], *, episode_id: str | None = None) -> None:
    """Say which task the current episode solved (as :func:`emit_reward` finds the episode):
    a :class:`Task` or a dict of its fields, ``{"id": ..., "data": {...}, "answer": ...}``, or
    of a data row's columns (``{"question": ..., "answer": ...}``: ``id`` from the row's
    ``id`` when it has one). Training from traces uses it to group samples of one task, to
    grade them, and to leave held-out tasks out; without it a trace's task is keyed by its
    first user message."""
    found = task if isinstance(task, Task) else _task_of(task)
    attrs = {sc.SPAN_TYPE: "task", sc.TASK_ID: found.id, sc.TASK_JSON: found.model_dump_json()}
    sess = None if episode_id is not None else _target()
    if sess is not None and sess.ended_at is None:  # open: on its root span, where the trainer puts it
        sess.task = found
        sess.set_attribute(sc.TASK_ID, found.id)
        sess.set_attribute(sc.TASK_JSON, attrs[sc.TASK_JSON])
        return
    with _recording("set_task", episode_id) as tracer:
        if tracer is not None:
            tracer.start_span("tracerl.task", attributes=attrs).end()


def _task_of(fields: Mapping[str, Any]) -> Task:
    if set(fields) <= set(Task.model_fields) and "id" in fields:
        return Task.model_validate(dict(fields))
    data = {str(k): v for k, v in fields.items()}
    task_id = data.get("id")
    if task_id is None or str(task_id).strip() == "":  # as tracerl.load_tasks names the row
        task_id = row_id(data, {k: data[k] for k in ("question",) if k in data}, data.get("answer"))
    return Task(id=str(task_id), data=data, answer=data.get("answer"))


def session_tracer(caller: str) -> trace.Tracer:
    """The current session's tracer (its provider need not be the global one), else the global."""
    sess = _current.get()
    if sess is not None:
        return sess.tracing.tracer()
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        log.warning("tracerl.%s: no tracing is set up, so the span goes nowhere; "
                    "call it inside tracerl.session() or after tracerl.setup_tracing()", caller)
    return get_tracer()


class ToolCallSpan:
    """The span of one tool call (:func:`tool_span`): set what the tool returned with :meth:`result`."""

    def __init__(self, span: trace.Span, content: bool):
        self.span, self._content = span, content

    def result(self, value: Any, *, error: str | None = None, **attributes: Any) -> None:
        """What the tool returned (``gen_ai.tool.call.result``), more attributes, and an error
        status when the tool itself failed (not when it ran and reported a failure)."""
        if self._content:
            self.span.set_attribute("gen_ai.tool.call.result", value if isinstance(value, str) else _json.dumps(value))
        for key, item in attributes.items():
            self.span.set_attribute(key, item)
        if error:
            self.span.set_status(Status(StatusCode.ERROR, error[:200]))


@contextlib.contextmanager
def tool_span(name: str, arguments: Any = None, *, call_id: str | None = None,
              content: bool = True) -> Iterator[ToolCallSpan]:
    """Record a tool call of the current episode as an OpenTelemetry GenAI ``execute_tool`` span,
    for agents that run their tools themselves (no framework adapter to record them)::

        with tracerl.tool_span("shell", {"command": cmd}, call_id=call["id"]) as span:
            out = run(cmd)
            span.result(out)

    ``content=False`` leaves out the arguments and the result (``gen_ai.tool.call.*`` are
    opt-in content in the GenAI conventions). An exception inside is recorded and re-raised."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                             "gen_ai.tool.type": "function"}
    if call_id:
        attrs["gen_ai.tool.call.id"] = call_id
    if content and arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = arguments if isinstance(arguments, str) else _json.dumps(arguments)
    with session_tracer("tool_span").start_as_current_span(f"execute_tool {name}", attributes=attrs) as span:
        yield ToolCallSpan(span, content)
