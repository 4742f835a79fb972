"""`qp login --browser`: the portal makes a token for this qp once its user signed in there
(by password or the organisation's single sign-on) and agreed. The browser brings it back to
a one-time listener on this computer's loopback address (RFC 8252's loopback redirect), with
a random state that must match."""

from __future__ import annotations

import http.server
import secrets
import threading
import urllib.parse
import webbrowser

from qp.client import NOT_SIGNED_IN, Failure

WAIT_SECONDS = 300
DONE_PAGE = (
    b"<!doctype html><title>qp</title><p>qp is signed in. You can close this tab and go "
    b"back to your terminal.</p>"
)


def by_browser(url: str, hostname: str, err, open_browser=webbrowser.open) -> str:
    state = secrets.token_urlsafe(24)
    received: dict[str, str] = {}
    arrived = threading.Event()

    class Callback(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            if query.get("state", [""])[0] != state or not query.get("token"):
                self.send_error(400, "not the answer qp waits for")
                return
            received["token"] = query["token"][0]
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(DONE_PAGE)
            arrived.set()

        def log_message(self, *args):  # the terminal shows qp's words only
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Callback)
    port = server.server_address[1]
    query = urllib.parse.urlencode({"port": port, "state": state, "host": _host(hostname)})
    address = f"{url}/account/tokens/cli/?{query}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        err.print(
            f"Sign in and agree in your browser; if it does not open, go to:\n{address}",
            markup=False,
        )
        open_browser(address)
        if not arrived.wait(WAIT_SECONDS):
            raise Failure(
                "no answer from the browser in 5 minutes; run qp login again", NOT_SIGNED_IN
            )
    finally:
        server.shutdown()
    return received["token"]


def _host(name: str) -> str:
    return "".join(c for c in name if c.isalnum() or c in "._-")[:64]
