"""W3C ``traceparent`` and ``baggage`` on every HTTP request the process makes, while someone
needs them: the framework adapters (``instrument(propagate=True)``) and an app's own function run
as the agent (``--agent app.py:run``, whose calls find their episode by the baggage).

Reversible wrappers of httpx's and httpx2's ``Client.send`` / ``AsyncClient.send`` (openai 3.x
talks through httpx2, litellm through httpx) and aiohttp's ``ClientSession._request`` (the one
method every aiohttp request goes through; private, hence checked by a test). Unlike the
OpenTelemetry httpx instrumentors they create no span per request, which training does not
need (the gateway's span is the call's). The global propagator writes nothing when there is no
current span and no baggage, so calls outside an episode are left untouched.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import threading
from typing import Any

from opentelemetry import propagate

__all__ = ["disable_http_propagation", "enable_http_propagation"]

_lock = threading.Lock()
_http_users: set[str] = set()  # who asked for HTTP propagation
_patched: list[tuple[Any, str]] = []  # (class, method) wrapped to inject W3C headers


def _inject(headers: Any) -> None:
    # The global propagator (W3C tracecontext + baggage by default) writes nothing when there
    # is no current span and no baggage, so calls outside a session are left untouched.
    propagate.inject(headers)


def _patch(cls: Any) -> None:
    original = cls.send
    if getattr(original, "_tracerl_original", None) is not None:
        return
    send: Any
    if inspect.iscoroutinefunction(original):

        async def send_async(self: Any, request: Any, **kwargs: Any) -> Any:
            _inject(request.headers)
            return await original(self, request, **kwargs)

        send = send_async
    else:

        def send_sync(self: Any, request: Any, **kwargs: Any) -> Any:
            _inject(request.headers)
            return original(self, request, **kwargs)

        send = send_sync
    send._tracerl_original = original
    functools.update_wrapper(send, original)
    cls.send = send
    _patched.append((cls, "send"))


def _patch_aiohttp(cls: Any) -> None:
    """aiohttp.ClientSession._request, which every get/post/request goes through: merge the
    W3C headers into the call's headers (a header the caller set wins)."""
    original = cls._request
    if getattr(original, "_tracerl_original", None) is not None:
        return

    async def _request(self: Any, method: str, str_or_url: Any, *args: Any, **kwargs: Any) -> Any:
        carrier: dict[str, str] = {}
        _inject(carrier)
        if carrier:
            from multidict import CIMultiDict

            headers = CIMultiDict(kwargs.get("headers") or ())
            for key, value in carrier.items():
                headers.setdefault(key, value)
            kwargs["headers"] = headers
        return await original(self, method, str_or_url, *args, **kwargs)

    _request._tracerl_original = original  # type: ignore[attr-defined]
    functools.update_wrapper(_request, original)
    cls._request = _request
    _patched.append((cls, "_request"))


def enable_http_propagation(user: str) -> None:
    """Send W3C traceparent + baggage on every httpx/httpx2/aiohttp request while any ``user``
    (an adapter's name, or another caller's) needs it."""
    with _lock:
        _http_users.add(user)
        if _patched:
            return
        for module_name in ("httpx", "httpx2"):
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            _patch(module.Client)
            _patch(module.AsyncClient)
        try:
            import aiohttp
        except ImportError:
            return
        _patch_aiohttp(aiohttp.ClientSession)


def disable_http_propagation(user: str) -> None:
    with _lock:
        _http_users.discard(user)
        if _http_users:
            return
        while _patched:
            cls, name = _patched.pop()
            setattr(cls, name, getattr(cls, name)._tracerl_original)
