"""A real HTTP receiver for webhook tests: records what it is sent, can answer errors, and
can go down and come back on the same port."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Listener:
    def __init__(self, secret: str = ""):
        self.secret = secret
        self.received: list[dict] = []  # {"headers", "body", "json"} in arrival order
        self.answer = 204
        self.delay = 0.0  # seconds before each answer: a slow receiver
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Listener:
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with listener._lock:
                    listener.received.append(
                        {"headers": dict(self.headers), "body": body, "json": json.loads(body)}
                    )
                    code = listener.answer
                time.sleep(listener.delay)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def events(self) -> list[dict]:
        with self._lock:
            return [r["json"] for r in self.received]

    def signed_correctly(self, request: dict) -> bool:
        expected = (
            "sha256=" + hmac.new(self.secret.encode(), request["body"], hashlib.sha256).hexdigest()
        )
        return hmac.compare_digest(expected, request["headers"].get("X-Quotaportal-Signature", ""))
