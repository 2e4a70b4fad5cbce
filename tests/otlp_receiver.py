"""An OTLP/HTTP trace receiver on 127.0.0.1 for tests: keeps every body POSTed to
/v1/traces (gzip undone) and decodes them into span records on demand."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tracerl.core.spans import SpanRecord, decode_otlp


class OTLPReceiver:
    """``url`` is the full /v1/traces endpoint; a context manager, or ``close()`` it."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []  # (content type, body)
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with lock:
                    receiver.bodies.append((self.headers.get("Content-Type", "application/x-protobuf"), body))
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1/traces"

    @property
    def spans(self) -> list[SpanRecord]:
        return [span for content_type, body in list(self.bodies) for span in decode_otlp(body, content_type)]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> OTLPReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
