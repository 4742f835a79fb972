"""Checking AWS Signature Version 4 on a request, as AWS does (standard library only).

The client signs a canonical form of the request with a key derived from its secret; the
server rebuilds the same canonical form and compares. Reference: AWS's "Create a signed AWS
API request" (SigV4), and botocore.auth.SigV4Auth, whose canonical forms this mirrors.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_CLOCK_SKEW = timedelta(minutes=15)
_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<credential>[^,\s]+),\s*"
    r"SignedHeaders=(?P<signed>[^,\s]+),\s*Signature=(?P<signature>[0-9a-f]{64})$"
)


class SignatureError(Exception):
    """Why a request is refused; `code` is AWS's error type for it."""

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(message)


@dataclass(frozen=True)
class Credential:
    access_key_id: str
    date: str  # yyyymmdd
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str
    amz_date: str  # yyyymmddThhmmssZ

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


def parse_authorization(authorization: str | None, amz_date: str | None, service: str):
    """The credential a request claims, or SignatureError when the header is malformed."""
    if not authorization:
        raise SignatureError(
            "MissingAuthenticationTokenException",
            "Missing Authentication Token: sign the request with an access key (AWS SigV4)",
        )
    match = _AUTHORIZATION.match(authorization.strip())
    if match is None:
        raise SignatureError(
            "IncompleteSignatureException",
            "Authorization header must be AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., "
            "Signature=...",
        )
    parts = match["credential"].split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise SignatureError(
            "IncompleteSignatureException",
            "Credential must be ACCESS_KEY/yyyymmdd/region/service/aws4_request",
        )
    if parts[3] != service:
        raise SignatureError(
            "InvalidSignatureException", f"Credential should be scoped to service '{service}'"
        )
    if not amz_date:
        raise SignatureError("IncompleteSignatureException", "X-Amz-Date header is missing")
    signed = tuple(match["signed"].split(";"))
    if "host" not in signed:
        raise SignatureError("InvalidSignatureException", "the host header must be signed")
    return Credential(parts[0], parts[1], parts[2], parts[3], signed, match["signature"], amz_date)


def check_clock(credential: Credential, now: datetime) -> None:
    try:
        signed_at = datetime.strptime(credential.amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SignatureError(
            "IncompleteSignatureException", "X-Amz-Date must look like 20261130T120000Z"
        ) from None
    if credential.date != credential.amz_date[:8]:
        raise SignatureError(
            "InvalidSignatureException", "Credential date does not match X-Amz-Date"
        )
    if abs(now - signed_at) > MAX_CLOCK_SKEW:
        raise SignatureError(
            "InvalidSignatureException",
            f"Signature expired: {credential.amz_date} is more than 15 minutes from the "
            f"server's time {now:%Y%m%dT%H%M%SZ}; check the client's clock",
        )


def canonical_query(query_string: str) -> str:
    """botocore signs the query exactly as it sends it, its pairs sorted."""
    if not query_string:
        return ""
    pairs = [pair.partition("=") for pair in query_string.split("&")]
    return "&".join(f"{key}={value}" for key, _, value in sorted(pairs))


def canonical_request(
    method: str, raw_path: str, query_string: str, headers, credential: Credential, body: bytes
) -> str:
    """`headers` maps lower-case names to values; `raw_path` is the path as the client sent it
    (still percent-encoded), which SigV4 encodes once more for every service but S3."""
    lines = []
    for name in credential.signed_headers:
        value = headers.get(name)
        if value is None:
            raise SignatureError(
                "InvalidSignatureException", f"signed header '{name}' is not in the request"
            )
        lines.append(f"{name}:{' '.join(str(value).split())}\n")
    payload_hash = headers.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest()
    return "\n".join(
        [
            method.upper(),
            quote(raw_path or "/", safe="/~"),
            canonical_query(query_string),
            "".join(lines),
            ";".join(credential.signed_headers),
            payload_hash,
        ]
    )


def signing_key(secret: str, credential: Credential) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (credential.date, credential.region, credential.service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def expected_signature(secret: str, credential: Credential, request: str) -> str:
    string_to_sign = "\n".join(
        [
            ALGORITHM,
            credential.amz_date,
            credential.scope,
            hashlib.sha256(request.encode("utf-8", "surrogateescape")).hexdigest(),
        ]
    )
    return hmac.new(
        signing_key(secret, credential), string_to_sign.encode(), hashlib.sha256
    ).hexdigest()


def check_signature(secret: str, credential: Credential, request: str) -> None:
    if not hmac.compare_digest(
        expected_signature(secret, credential, request), credential.signature
    ):
        raise SignatureError(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method.",
        )
