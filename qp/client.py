"""The portal's REST API, as qp calls it: JSON in and out, errors turned into one exception
that knows its exit code and says what to fix."""

from __future__ import annotations

from dataclasses import dataclass

import requests

# Exit codes (docs/guides/cli.md): scripts branch on them.
OK, REFUSED, USAGE, NOT_SIGNED_IN, FORBIDDEN, NOT_FOUND, UNREACHABLE = 0, 1, 2, 3, 4, 5, 6
TIMEOUT = 30.0


@dataclass
class Failure(Exception):
    """The portal said no (or could not be reached): `message` in words, `detail` as it
    answered, `code` the exit code."""

    message: str
    code: int = REFUSED
    status: int | None = None
    detail: object = None

    def __str__(self) -> str:
        return self.message


class Client:
    def __init__(self, url: str, token: str):
        if not url:
            raise Failure("no portal to talk to: run qp login URL (or set QP_URL)", NOT_SIGNED_IN)
        if not token:
            raise Failure(f"not signed in to {url}: run qp login (or set QP_TOKEN)", NOT_SIGNED_IN)
        self.base = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers.update(
            {"Authorization": f"Token {token}", "Accept": "application/json"}
        )

    def get(self, path: str, **params) -> dict:
        return self._json(self._call("GET", path, params=_present(params)))

    def post(self, path: str, body: dict | None = None) -> dict:
        return self._json(self._call("POST", path, json=body or {}))

    def patch(self, path: str, body: dict) -> dict:
        return self._json(self._call("PATCH", path, json=body))

    def raw(self, path: str, **params) -> requests.Response:
        """A response read as bytes (a job's output), its headers with it."""
        return self._call("GET", path, params=_present(params), headers={"Accept": "text/plain"})

    def _call(self, method: str, path: str, **kwargs) -> requests.Response:
        url = f"{self.base}/api/v1/{path.lstrip('/')}"
        try:
            response = self.session.request(method, url, timeout=TIMEOUT, **kwargs)
        except requests.RequestException as err:
            raise Failure(f"cannot reach {self.base}: {_first_line(err)}", UNREACHABLE) from None
        if response.status_code >= 400:
            raise _failure(response)
        return response

    @staticmethod
    def _json(response: requests.Response) -> dict:
        try:
            return response.json() if response.content else {}
        except ValueError:
            raise Failure(
                f"{response.url} did not answer JSON: is it a quotaportal?", UNREACHABLE
            ) from None


def _present(params: dict) -> dict:
    return {k: v for k, v in params.items() if v is not None and v != ""}


def _failure(response: requests.Response) -> Failure:
    try:
        detail = response.json()
    except ValueError:
        detail = response.text[:500]
    words = _words(detail) or f"HTTP {response.status_code}"
    code = {
        401: NOT_SIGNED_IN,
        403: FORBIDDEN,
        404: NOT_FOUND,
    }.get(response.status_code, UNREACHABLE if response.status_code >= 500 else REFUSED)
    if response.status_code == 401:
        words += " (sign in again: qp login)"
    return Failure(words, code, response.status_code, detail)


def _words(detail) -> str:
    """{"quantity": ["must be at least 1"]} -> "quantity: must be at least 1"."""
    if isinstance(detail, dict):
        parts = []
        for field, value in detail.items():
            text = _words(value)
            parts.append(text if field in ("detail", "non_field_errors") else f"{field}: {text}")
        return "; ".join(parts)
    if isinstance(detail, list):
        return " ".join(_words(item) for item in detail)
    return str(detail)


def _first_line(err: Exception) -> str:
    return str(err).splitlines()[0][:200] if str(err) else type(err).__name__
