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

Nothing here is imported before it is used: ``openai``, ``langchain_openai`` load on the call.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import threading
import weakref
from typing import Any

_lock = threading.Lock()
_tls: ssl.SSLContext | None = None
_sync_http: Any = None
_local = threading.local()  # this thread's (weak ref to its event loop, async pool)


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
    _sync_http, _lock = None, threading.Lock()
    _local.__dict__.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@functools.cache
def _shared_classes() -> tuple[type, type]:
    """openai's default HTTP client classes, with ``close()`` / ``aclose()`` that do nothing."""
    import openai

    class SharedHttpxClient(openai.DefaultHttpxClient):
        def close(self) -> None:  # shared by every episode's client
            pass

    class SharedAsyncHttpxClient(openai.DefaultAsyncHttpxClient):
        async def aclose(self) -> None:  # shared by the episodes on this loop
            pass

    return SharedHttpxClient, SharedAsyncHttpxClient


def sync_http_client() -> Any:
    """The process's synchronous HTTP client (openai's ``DefaultHttpxClient``)."""
    global _sync_http
    tls = tls_context()
    with _lock:
        if _sync_http is None:
            _sync_http = _shared_classes()[0](verify=tls)
        return _sync_http


def async_http_client() -> Any:
    """An asynchronous HTTP client for the running event loop, shared by the episodes on it
    (a new one, on the shared TLS context, when called outside a loop)."""
    shared = _shared_classes()[1]
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return shared(verify=tls_context())
    held = getattr(_local, "held", None)
    if held is not None and held[0]() is loop:
        return held[1]
    client = shared(verify=tls_context())
    _local.held = (weakref.ref(loop), client)  # the previous loop's pool goes with its clients
    return client


def openai_client(base_url: str, api_key: str, **options: Any) -> Any:
    """``openai.OpenAI`` for ``base_url`` on the shared pool; ``options`` go to the client."""
    import openai

    return openai.OpenAI(base_url=base_url, api_key=api_key, http_client=sync_http_client(), **options)


def async_openai_client(base_url: str, api_key: str, **options: Any) -> Any:
    """``openai.AsyncOpenAI`` for ``base_url`` on the running loop's shared pool."""
    import openai

    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, http_client=async_http_client(), **options)


def chat_openai(base_url: str, api_key: str, **options: Any) -> Any:
    """LangChain's ``ChatOpenAI`` for ``base_url`` on the shared pools."""
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        from .errors import MissingDependencyError

        raise MissingDependencyError("langchain-openai", "langchain", "RolloutContext.chat_openai") from exc
    return ChatOpenAI(base_url=base_url, api_key=api_key, http_client=sync_http_client(),
                      http_async_client=async_http_client(), **options)
