"""The agent's requests keep their connection open between them; one the server closed while
it sat idle is replaced without the request failing; the server's refusals read as before;
through a proxy each request goes as urllib sends it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from quotaportal.hosts.agent.client import AgentError, AuthError, Client, Gap, Unreachable
from tests.hosts.builders import wait_until


class Portal:
    """A stand-in for the portal's agent API: it answers each POST with what `answers`
    holds for its path (default 200 {"ok": true}) and notes each request's connection."""

    def __init__(self):
        self.requests: list[tuple[int, str, dict]] = []  # (connection number, path, body)
        self.answers: dict[str, tuple[int, dict]] = {}
        self.connections = 0
        self.ended = 0  # connections the client closed
        self.hang_up = False  # after answering, close the connection without saying so
        portal = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as gunicorn

            def setup(self):
                super().setup()
                portal.connections += 1
                self.number = portal.connections

            def do_POST(self):  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                json_sent = self.headers["Content-Type"] == "application/json"
                body = json.loads(raw) if json_sent else {"bytes": raw}
                portal.requests.append((self.number, self.path, body))
                path = self.path.rsplit("/api/v1/agent/")[-1].split("?")[0]
                status, answer = portal.answers.get(path, (200, {"ok": True}))
                raw = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
                # As a server's keep-alive timeout ends a connection that sat idle: the
                # client learns it only from its next request.
                self.close_connection = portal.hang_up

            def finish(self):
                super().finish()
                portal.ended += 1

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def portal(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    portal = Portal()
    yield portal
    portal.server.shutdown()
    portal.server.server_close()


def test_requests_share_one_connection(portal):
    client = Client(portal.url, "secret")
    for n in range(3):
        assert client.post("heartbeat/", {"name": "gpu-1", "n": n}) == {"ok": True}
    assert [(c, path) for c, path, _ in portal.requests] == [(1, "/api/v1/agent/heartbeat/")] * 3
    assert [body["n"] for _, _, body in portal.requests] == [0, 1, 2]


def post_here_and_from_another_thread(client: Client) -> None:
    client.post("heartbeat/", {})
    other = threading.Thread(target=client.post, args=("reports/", {}))
    other.start()
    other.join()


def test_each_thread_has_its_own_connection(portal):
    client = Client(portal.url, "secret")
    post_here_and_from_another_thread(client)
    client.post("heartbeat/", {})
    assert [c for c, _, _ in portal.requests] == [1, 2, 1]


def test_a_connection_the_server_closed_meanwhile_is_replaced_and_the_request_goes(portal):
    client = Client(portal.url, "secret")
    portal.hang_up = True
    assert client.post("reports/", {"n": 1}) == {"ok": True}
    assert client.post("reports/", {"n": 2}) == {"ok": True}
    assert [(c, body["n"]) for c, _, body in portal.requests] == [(1, 1), (2, 2)]


def test_refusals_read_as_before(portal):
    client = Client(portal.url, "secret")
    portal.answers = {
        "register/": (401, {"detail": "Invalid agent token."}),
        "reports/": (400, {"reports": ["too many"]}),
        "output/": (409, {"detail": "gap", "next_offset": 12}),
        "heartbeat/": (503, {"detail": "down"}),
    }
    with pytest.raises(AuthError, match="Invalid agent token"):
        client.register("gpu-1", "gpu1", [0], "")
    with pytest.raises(AgentError, match="reports: \\['too many'\\]"):
        client.reports("gpu-1", [])
    with pytest.raises(Gap) as gap:
        client.post_output("gpu-1", 1, 0, b"x", False)
    assert gap.value.expected == 12
    with pytest.raises(Unreachable, match="server error 503: down"):
        client.heartbeat("gpu-1")
    assert client.post("other/", {}) == {"ok": True}, "the connection outlived the refusals"
    assert {c for c, _, _ in portal.requests} == {1}


def test_a_server_that_is_not_there_is_unreachable():
    portal = Portal()
    url = portal.url
    portal.server.server_close()
    with pytest.raises(Unreachable):
        Client(url, "secret", timeout=1).post("heartbeat/", {})


def test_through_a_proxy_each_request_goes_as_urllib_sends_it(portal, monkeypatch):
    """The stand-in plays the proxy: a proxied request names the whole address. (urlopen,
    called first, builds the process's opener before the proxy is set.)"""
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen("http://portal.invalid:8000/", timeout=2)
    monkeypatch.setenv("http_proxy", portal.url)
    client = Client("http://portal.invalid:8000", "secret")
    assert client.post("heartbeat/", {"n": 1}) == {"ok": True}
    assert [path for _, path, _ in portal.requests] == [
        "http://portal.invalid:8000/api/v1/agent/heartbeat/"
    ]


def test_closing_the_client_ends_every_threads_connection(portal):
    """An agent run in-process (`main`) leaves no connection open behind it."""
    client = Client(portal.url, "secret")
    post_here_and_from_another_thread(client)
    assert portal.ended == 0, "kept open between requests"
    client.close()
    wait_until(lambda: portal.ended == 2, timeout=5, what="both connections to end")
    assert client.post("heartbeat/", {}) == {"ok": True}, "a request after it opens a new one"
    assert portal.connections == 3
