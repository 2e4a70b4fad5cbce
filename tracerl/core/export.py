"""What ``tracerl traces export`` writes: the episodes of one app, of one trajectory name, by id.

Two apps writing one store (the default ``$TRACERL_HOME/traces.db``, or a shared PostgreSQL
database) mix their episodes; an export narrows them down by

* ``service``: the OpenTelemetry ``service.name`` of the app (``tracerl.instrument(...,
  service_name=...)`` or ``OTEL_SERVICE_NAME``). An episode is the app's when any of its spans
  is, and it is exported whole: the gateway's token-level spans (service ``tracerl-gateway``)
  stay joined to the app's sessions, so the episodes rebuilt from the export keep their token ids;
* ``trajectory``: the name the converter gives a trajectory (the agent's name, else the
  LangGraph node's, else ``main``: :func:`~.convert.episode_from_spans`). An episode with a
  trajectory of that name is exported whole, its other trajectories too, so that what trains
  on the export sees each episode as it ran (its reward, its other agents' turns).

Each selection is a stream of episodes' spans, one list at a time, so an export of a large store
converts one episode at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from .errors import ConfigError
from .spans import SpanRecord
from .store import SpanStore


def check_service(store: SpanStore, service: str) -> None:
    """Refuse a service the store has no span of, in one line naming those it has (an empty
    store passes: exporting nothing says where spans usually are)."""
    known = store.services()
    if not known or any(s.service == service for s in known):
        return
    named = ", ".join(f"{s.service} ({s.episodes} episodes)" for s in known if s.service is not None)
    raise ConfigError(f"no spans of service {service!r} in {store.where}; the services there: {named or 'none named'} "
                      "(an app names its service with tracerl.instrument(..., service_name=...) or OTEL_SERVICE_NAME)")


def select_episodes(
    store: SpanStore,
    *,
    episodes: Sequence[str] | None = None,
    service: str | None = None,
    trajectory: str | None = None,
    since_ns: int | None = None,
) -> Iterator[list[SpanRecord]]:
    """The spans to export, a list per query: ``episodes`` (ids) or all, those of ``service``,
    with a trajectory named ``trajectory``, spans started since ``since_ns``. Without
    ``trajectory`` and ``episodes`` that is one query; a ``trajectory`` converts each candidate
    episode and raises :class:`ConfigError` naming the trajectories seen when none matches."""
    if trajectory is None:
        wanted: list[str | None] = list(episodes) if episodes else [None]
        for sid in wanted:
            yield store.spans(session_id=sid, service=service, since_ns=since_ns)
        return
    from .convert import episode_from_spans

    ids = list(episodes) if episodes else [s.session_id for s in reversed(store.sessions(service=service))]
    seen: Counter[str] = Counter()
    looked = 0
    for sid in ids:
        records = store.spans(session_id=sid, service=service, since_ns=since_ns)
        if not records:
            continue
        looked += 1
        names = {t.name for t in episode_from_spans(records, episode_id=sid).trajectories}
        seen.update(names)
        if trajectory in names:
            yield records
    if looked and trajectory not in seen:  # (no episode at all: the caller says where spans are)
        which = f" of service {service!r}" if service else ""
        named = ", ".join(f"{name} ({n} episodes)" for name, n in sorted(seen.items())) or "none (no LLM calls)"
        raise ConfigError(f"no episode{which} in {store.where} has a trajectory named {trajectory!r}; the "
                          f"trajectories there: {named}")
