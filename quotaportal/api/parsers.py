"""The JSON parser every endpoint uses: a body is a JSON object of storable text.

Checked once here rather than in each serializer: a body that is `null`, `1` or a list, and
text PostgreSQL cannot store (NUL, or a lone surrogate such as "\\ud800" that has no UTF-8
form), get a 400 that says what to fix instead of failing deep in a view or a query.
"""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def unstorable_text(value, path: str = "body") -> str | None:
    """Where the first string PostgreSQL cannot store sits, with why; None if all is well."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return f"{where} contains a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{where} contains a lone surrogate (such as \\ud800), which is not text"
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, f"{where} key"))
                stack.append((child, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
    return None


class ObjectJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        if not isinstance(data, dict):
            raise ParseError(f"the request body must be a JSON object, not {_kind(data)}")
        if problem := unstorable_text(data):
            raise ParseError(f"{problem}; remove it and send the request again")
        return data


def _kind(data) -> str:
    return {type(None): "null", bool: "a boolean", list: "a list", str: "a string"}.get(
        type(data), "a number"
    )
