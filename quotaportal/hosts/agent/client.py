"""The agent's side of the HTTP protocol (stdlib urllib, JSON)."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.parse
import urllib.request


class AgentError(Exception):
    """The server refused a request; retrying the same request will not help."""


class AuthError(AgentError):
    """The token is wrong or revoked."""


class Gap(AgentError):
    """The portal stores a rank's output up to `expected`: send from there."""

    def __init__(self, expected: int):
        super().__init__(f"the portal expects output from byte {expected}")
        self.expected = expected


class Unreachable(Exception):
    """The server did not answer; the agent keeps its jobs running and retries."""


class Client:
    """Requests to the portal, each thread (the loop's, the reporter's, the poller's, the
    shipper's) on a connection of its own that it keeps open between requests: a busy host
    sends several a second, and a new connection each time cost both ends a TCP (and, over
    HTTPS, a TLS) handshake. Through a proxy (the `http_proxy` family of variables) each
    request goes as urllib sends it."""

    def __init__(self, server: str, token: str, timeout: float = 10.0):
        self.base = server.rstrip("/") + "/api/v1/agent/"
        self.token = token
        self.timeout = timeout
        parts = urllib.parse.urlsplit(self.base)
        self._origin = (parts.scheme, parts.hostname, parts.port)
        self._prefix = parts.path
        proxied = bool(urllib.request.getproxies().get(parts.scheme)) and not (
            urllib.request.proxy_bypass(parts.hostname or "")
        )
        # Its own opener, with the proxies set now (urlopen's is built once per process).
        self._proxy_opener = urllib.request.build_opener() if proxied else None
        self._local = threading.local()
        self._open: set[http.client.HTTPConnection] = set()  # every thread's
        self._open_lock = threading.Lock()

    def post(self, path: str, body: dict, timeout: float | None = None) -> dict:
        return self._send(path, json.dumps(body).encode(), "application/json", timeout)

    def _send(self, path: str, data: bytes, content_type: str, timeout: float | None) -> dict:
        headers = {"Content-Type": content_type, "Authorization": f"Agent {self.token}"}
        timeout = timeout or self.timeout
        try:
            if self._proxy_opener is not None:
                status, raw = _through(self._proxy_opener, self.base + path, data, headers, timeout)
            else:
                status, raw = self._kept_alive(self._prefix + path, data, headers, timeout)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            # A connection cut mid-answer (IncompleteRead, BadStatusLine) is the network's
            # failure too, never a reason for the agent to stop.
            raise Unreachable(str(getattr(err, "reason", err)) or type(err).__name__) from None
        if status < 300:
            return json.loads(raw or b"{}")
        body = _body(raw)
        detail = _detail(status, body)
        if status in (401, 403):
            raise AuthError(detail)
        if status == 409 and isinstance(body.get("next_offset"), int):
            raise Gap(body["next_offset"])
        if 400 <= status < 500:
            raise AgentError(detail)
        raise Unreachable(f"server error {status}: {detail}")

    def _kept_alive(self, path: str, data: bytes, headers: dict, timeout: float):
        """(status, body) over this thread's open connection. One the server closed while it
        sat idle fails as the request goes out: that request is sent again on a new one (a
        request is safe to repeat: a report or output chunk the portal has already is
        refused or ignored, a heartbeat is a question)."""
        connection = getattr(self._local, "connection", None)
        reused = connection is not None
        if connection is None:
            connection = self._local.connection = self._connect()
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        try:
            connection.request("POST", path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self._drop()
            if not reused:
                raise
            return self._kept_alive(path, data, headers, timeout)
        except (OSError, http.client.HTTPException):
            self._drop()  # half a request or answer on it: never use it again
            raise
        if response.will_close:
            self._drop()
        return response.status, raw

    def close(self) -> None:
        """Close every thread's connection (the agent is stopping); a later request opens a
        new one."""
        with self._open_lock:
            open_now, self._open = self._open, set()
            self._local = threading.local()
        for connection in open_now:
            connection.close()

    def _connect(self) -> http.client.HTTPConnection:
        scheme, host, port = self._origin
        kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        connection = kind(host, port, timeout=self.timeout)
        with self._open_lock:
            self._open.add(connection)
        return connection

    def _drop(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            with self._open_lock:
                self._open.discard(connection)
            connection.close()

    def post_output(self, name: str, placement: int, offset: int, data: bytes, final: bool) -> dict:
        """A chunk of a rank's output at `offset`: {"next_offset", "full"}; Gap when the
        portal expects another offset."""
        query = urllib.parse.urlencode(
            {"name": name, "placement": placement, "offset": offset, "final": final}
        )
        return self._send(f"output/?{query}", data, "application/octet-stream", None)

    def register(self, name: str, capacity_unit: str, gpus: list[int], address: str) -> dict:
        return self.post(
            "register/",
            {"name": name, "capacity_unit": capacity_unit, "gpus": gpus, "address": address},
        )

    def heartbeat(
        self,
        name: str,
        running: list[int] | None = None,
        wait: float = 0.0,
        known: str = "",
        heard_up_to: int | None = None,
    ) -> dict:
        """{"placements": what should run here, "version": their version, "lease_seconds": how
        long silence may last}. With `wait`, the server answers once the placements differ
        from version `known`, or after `wait` seconds (a long-poll)."""
        body = {"name": name}
        if running is not None:
            body["running"] = running
        if heard_up_to is not None:
            body["heard_up_to"] = heard_up_to
        if wait > 0:
            body.update(wait=wait, known=known)
        return self.post("heartbeat/", body, timeout=self.timeout + wait)

    def report(
        self,
        name: str,
        placement: int,
        event: str,
        exit_code: int | None = None,
        output_tail: str = "",
        reason: str = "",
        age: float | None = None,
    ) -> None:
        body = {
            "name": name,
            "placement": placement,
            "event": event,
            "exit_code": exit_code,
            "output_tail": output_tail,
        }
        if reason:
            body["reason"] = reason
        if age is not None:
            body["age"] = age
        self.post("report/", body)

    def reports(self, name: str, reports: list[dict]) -> dict:
        """Several reports in one request, applied in order: {"results": one for each}, and
        when they freed capacity what should run here now, as a heartbeat answers."""
        return self.post("reports/", {"name": name, "reports": reports})


def _through(opener, url: str, data: bytes, headers: dict, timeout: float) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _body(raw: bytes) -> dict:
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {"detail": body}


def _detail(code: int, body: dict) -> str:
    if not body:
        return f"HTTP {code}"
    return "; ".join(f"{k}: {v}" if k != "detail" else str(v) for k, v in body.items())
