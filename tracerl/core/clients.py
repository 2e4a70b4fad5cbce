"""HTTP clients for rollouts, shared by every episode of the process.

Each episode has its own session URL, so the simple way to reach it is a client per episode;
but every new ``OpenAI``/``AsyncOpenAI`` client (and a ``ChatOpenAI`` for a new URL, or a
LiteLLM call to a new ``api_base``) builds a TLS context and loads the CA bundle again,
~17 ms of CPU: more than everything else a small agent's episode costs. Written that way, a
100-step run on a one-call task took 248 s instead of 54. The helpers here (reached through
:class:`~tracerl.core.rollout.RolloutContext`) bind a client to the episode's URL around one
TLS context for the process, one connection pool for synchronous clients (thread-safe), and
one pool per event loop and thread for asynchronous ones (an async pool must not outlive
its loop). The shared pools ignore ``close()``: an agent that closes its client, or uses it
as a context manager, does not break the other episodes' clients.

Their read timeout follows the episode's ``timeout_s`` (:func:`http_timeout`), never a fixed
figure: on a busy machine an engine that takes minutes per reply is slow, and an episode it is
still serving must not fail for it (issue 42: a fixed 120 s failed every episode of an eval).

Nothing here is imported before it is used: ``openai``, ``langchain_openai`` load on the call.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import os
import ssl
import threading
import weakref
from typing import Any

from .errors import require

_lock = threading.Lock()
_tls: ssl.SSLContext | None = None
_sync_http: dict[str, Any] = {}  # per SDK ("openai", "anthropic"): each brings its own httpx flavour
_local = threading.local()  # per SDK, this thread's (weak ref to its event loop, async pool)

CONNECT_TIMEOUT_S = 10.0
"""The one fixed bound: reaching the gateway. A busy engine slows replies, not the connect."""


def http_timeout(timeout_s: float | None, sdk: str = "httpx") -> Any:
    """``sdk``'s ``Timeout`` for an episode with wall-clock limit ``timeout_s``: reads (and
    writes, and the wait for a pooled connection) may take up to ``timeout_s``, unbounded when
    it is None, so only the episode's own limit ends a call the engine is still serving; the
    connect stays bounded by :data:`CONNECT_TIMEOUT_S`. With a limit the episode ends there
    anyway; the read timeout then frees the call its worker thread is left waiting on."""
    return importlib.import_module(sdk).Timeout(timeout_s, connect=CONNECT_TIMEOUT_S)


def tls_context() -> ssl.SSLContext:
    """The process's one TLS context (certificate verification as the openai SDK does it)."""
    global _tls
    with _lock:
        if _tls is None:
            _tls = ssl.create_default_context()
        return _tls


def _reset_after_fork() -> None:
    # A connection pool, or a lock held at the fork, belongs to the parent.
    global _sync_http, _lock
    _sync_http, _lock = {}, threading.Lock()
    _local.__dict__.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@functools.cache
def _shared_classes(sdk: str = "openai") -> tuple[type, type]:
    """The SDK's default HTTP client classes, with ``close()`` / ``aclose()`` that do nothing
    (the anthropic SDK runs on httpx2, the openai SDK on httpx: a pool each)."""
    module = importlib.import_module(sdk)

    class SharedHttpxClient(module.DefaultHttpxClient):  # type: ignore[name-defined]
        def close(self) -> None:  # shared by every episode's client
            pass

    class SharedAsyncHttpxClient(module.DefaultAsyncHttpxClient):  # type: ignore[name-defined]
        async def aclose(self) -> None:  # shared by the episodes on this loop
            pass

    return SharedHttpxClient, SharedAsyncHttpxClient


def sync_http_client(sdk: str = "openai") -> Any:
    """The process's synchronous HTTP client for ``sdk`` (its ``DefaultHttpxClient``)."""
    tls = tls_context()
    with _lock:
        if sdk not in _sync_http:
            _sync_http[sdk] = _shared_classes(sdk)[0](verify=tls)
        return _sync_http[sdk]


def async_http_client(sdk: str = "openai") -> Any:
    """An asynchronous HTTP client for ``sdk`` on the running event loop, shared by the
    episodes on it (a new one, on the shared TLS context, when called outside a loop)."""
    shared = _shared_classes(sdk)[1]
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return shared(verify=tls_context())
    held = getattr(_local, sdk, None)
    if held is not None and held[0]() is loop:
        return held[1]
    client = shared(verify=tls_context())
    setattr(_local, sdk, (weakref.ref(loop), client))  # the previous loop's pool goes with its clients
    return client


def openai_client(base_url: str, api_key: str, *, timeout_s: float | None = None, **options: Any) -> Any:
    """``openai.OpenAI`` for ``base_url`` on the shared pool; ``options`` go to the client, whose
    ``timeout`` is :func:`http_timeout` of the episode's ``timeout_s`` unless they give one (the
    same for every helper here)."""
    import openai

    options.setdefault("timeout", http_timeout(timeout_s, "openai"))
    return openai.OpenAI(base_url=base_url, api_key=api_key, http_client=sync_http_client(), **options)


def async_openai_client(base_url: str, api_key: str, *, timeout_s: float | None = None, **options: Any) -> Any:
    """``openai.AsyncOpenAI`` for ``base_url`` on the running loop's shared pool."""
    import openai

    options.setdefault("timeout", http_timeout(timeout_s, "openai"))
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, http_client=async_http_client(), **options)


def chat_openai(base_url: str, api_key: str, *, timeout_s: float | None = None, **options: Any) -> Any:
    """LangChain's ``ChatOpenAI`` for ``base_url`` on the shared pools."""
    lc = require("langchain_openai", "langchain-openai", "langchain", "RolloutContext.chat_openai")
    options.setdefault("timeout", http_timeout(timeout_s, "openai"))
    return lc.ChatOpenAI(base_url=base_url, api_key=api_key, http_client=sync_http_client(),
                         http_async_client=async_http_client(), **options)


def anthropic_base_url(base_url: str) -> str:
    """The Anthropic SDK's base URL for a session's OpenAI one: it appends ``/v1/messages`` itself."""
    return base_url.rstrip("/").removesuffix("/v1")


def anthropic_client(base_url: str, api_key: str, *, timeout_s: float | None = None, **options: Any) -> Any:
    """``anthropic.Anthropic`` for the session at ``base_url`` (its OpenAI form, ``.../v1``), on
    the shared pool; ``options`` go to the client."""
    anthropic = require("anthropic", "anthropic", "anthropic", "RolloutContext.anthropic_client")
    options.setdefault("timeout", http_timeout(timeout_s, "anthropic"))
    return anthropic.Anthropic(base_url=anthropic_base_url(base_url), api_key=api_key,
                               http_client=sync_http_client("anthropic"), **options)


def async_anthropic_client(base_url: str, api_key: str, *, timeout_s: float | None = None, **options: Any) -> Any:
    """``anthropic.AsyncAnthropic`` for the session at ``base_url``, on the running loop's pool."""
    anthropic = require("anthropic", "anthropic", "anthropic", "RolloutContext.async_anthropic_client")
    options.setdefault("timeout", http_timeout(timeout_s, "anthropic"))
    return anthropic.AsyncAnthropic(base_url=anthropic_base_url(base_url), api_key=api_key,
                                    http_client=async_http_client("anthropic"), **options)


def chat_anthropic(base_url: str, api_key: str, *, timeout_s: float | None = None, **options: Any) -> Any:
    """LangChain's ``ChatAnthropic`` for the session at ``base_url`` (it builds its own HTTP
    client per URL)."""
    lc = require("langchain_anthropic", "langchain-anthropic", "anthropic", "RolloutContext.chat_anthropic")
    options.setdefault("timeout", timeout_s)  # a float or None (unbounded) is all ChatAnthropic takes
    return lc.ChatAnthropic(base_url=anthropic_base_url(base_url), api_key=api_key, **options)
