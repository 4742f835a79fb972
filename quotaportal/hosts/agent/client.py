"""The agent's side of the HTTP protocol (stdlib urllib, JSON)."""

from __future__ import annotations

import http.client
import json
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
    def __init__(self, server: str, token: str, timeout: float = 10.0):
        self.base = server.rstrip("/") + "/api/v1/agent/"
        self.token = token
        self.timeout = timeout

    def post(self, path: str, body: dict, timeout: float | None = None) -> dict:
        return self._send(path, json.dumps(body).encode(), "application/json", timeout)

    def _send(self, path: str, data: bytes, content_type: str, timeout: float | None) -> dict:
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method="POST",
            headers={"Content-Type": content_type, "Authorization": f"Agent {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            body = _body(err)
            detail = _detail(err.code, body)
            if err.code in (401, 403):
                raise AuthError(detail) from None
            if err.code == 409 and isinstance(body.get("next_offset"), int):
                raise Gap(body["next_offset"]) from None
            if 400 <= err.code < 500:
                raise AgentError(detail) from None
            raise Unreachable(f"server error {err.code}: {detail}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            # A connection cut mid-answer (IncompleteRead, BadStatusLine) is the network's
            # failure too, never a reason for the agent to stop.
            raise Unreachable(str(getattr(err, "reason", err)) or type(err).__name__) from None

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


def _body(err: urllib.error.HTTPError) -> dict:
    try:
        body = json.loads(err.read() or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {"detail": body}


def _detail(code: int, body: dict) -> str:
    if not body:
        return f"HTTP {code}"
    return "; ".join(f"{k}: {v}" if k != "detail" else str(v) for k, v in body.items())
