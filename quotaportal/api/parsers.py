"""The JSON parser every endpoint uses: a body is a JSON object of storable text.

Checked once here rather than in each serializer: a body that is `null`, `1` or a list,
nesting deeper than any request needs (which would exhaust the parser's recursion), and text
PostgreSQL cannot store (NUL, or a lone surrogate such as "\\ud800" that has no UTF-8 form),
get a 400 that says what to fix instead of failing deep in a view or a query.
"""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser

from quotaportal.infra.bodies import TOO_DEEP, too_deep, unstorable_text


class ObjectJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"the request body {TOO_DEEP}") from None
        if too_deep(data):
            raise ParseError(f"the request body {TOO_DEEP}")
        if not isinstance(data, dict):
            raise ParseError(f"the request body must be a JSON object, not {_kind(data)}")
        if problem := unstorable_text(data):
            raise ParseError(f"{problem}; remove it and send the request again")
        return data


def _kind(data) -> str:
    return {type(None): "null", bool: "a boolean", list: "a list", str: "a string"}.get(
        type(data), "a number"
    )


class BytesParser(BaseParser):
    """A body of raw bytes (a chunk of a job's output), given to the view as they came."""

    media_type = "application/octet-stream"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read() if stream is not None else b""
