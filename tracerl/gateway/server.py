"""Run the gateway: in-process for tests and the trainer, or from ``tracerl gateway serve``."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Any

from tracerl.core.errors import ConfigError
from tracerl.core.rollout import session_base_url
from tracerl.core.store import SpanStore, open_store

KEEP_ALIVE_S = 75  # seconds an idle keep-alive connection stays open (nginx's default)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to expose an unauthenticated model server beyond this machine."""
    if not is_loopback(host) and not api_key:
        raise ConfigError(
            f"refusing to serve on {host} without an API key: anyone who can reach it could use "
            "the model and write spans. Pass --api-key (or bind 127.0.0.1)"
        )


def bind_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (as uvicorn binds one), for ``uvicorn.Server.run(sockets=...)``.

    Binding first, before the model loads, makes a busy port one line at once instead of a
    uvicorn log line after a slow start; handing the same socket to uvicorn leaves no moment
    in which another process could take the port."""
    import errno

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = {errno.EADDRINUSE: "the port is in use by another process",
               errno.EACCES: "this user may not bind that port",
               errno.EADDRNOTAVAIL: "that address is not one of this machine's"}.get(exc.errno or 0, exc.strerror)
        raise ConfigError(f"cannot serve on {host}:{port}: {why}; pass another --port (or --host), "
                          "or stop what holds it") from exc
    sock.set_inheritable(True)
    return sock


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now (the OS picks it; another process may take it before use)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class GatewayServer:
    """``with GatewayServer(engine, store) as gw:`` serves on ``gw.url`` (127.0.0.1, a free port)."""

    def __init__(self, engine: Any, store: SpanStore | str | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, api_key: str | None = None, model_aliases: tuple[str, ...] = (),
                 log_level: str = "warning", continue_tokens: bool = True, accept_weights: bool = False):
        import uvicorn

        from .app import create_app

        check_bind(host, api_key)
        self.engine = engine
        self.store = store if isinstance(store, SpanStore) else open_store(store)
        self.host, self.port = host, port or free_port(host)
        self.app = create_app(engine, self.store, api_key=api_key, model_aliases=model_aliases,
                              continue_tokens=continue_tokens, accept_weights=accept_weights)
        # Keep idle connections longer than clients do (httpx, hence the openai SDK: 5 s), so
        # it is always the client that closes one: with equal timeouts a client could send a
        # request on a connection in the instant the server drops it (a ReadError under load).
        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level=log_level, lifespan="off",
                                timeout_keep_alive=KEEP_ALIVE_S)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def session_url(self, session_id: str, seed: int | None = None) -> str:
        """The session's OpenAI base URL; with ``seed``, its calls without a seed are seeded (app.session_seed)."""
        return session_base_url(self.url, session_id, seed)

    def start(self, timeout_s: float = 30.0) -> GatewayServer:
        self._thread = threading.Thread(target=self._server.run, name="tracerl-gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the gateway did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> GatewayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
