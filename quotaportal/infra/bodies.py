"""Request bodies every interface parses alike: JSON nested no deeper than any request needs
(deeper would exhaust the parser's recursion), and text PostgreSQL can store (no NUL, no lone
surrogate such as "\\ud800", which has no UTF-8 form)."""

from __future__ import annotations

import json

MAX_DEPTH = 32  # objects and lists inside each other; real requests use fewer than 10
TOO_DEEP = f"nests objects and lists more than {MAX_DEPTH} deep; flatten it"


def loads(text: str | bytes):
    """json.loads, with nesting too deep for it reported as ValueError like any bad JSON."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    if too_deep(value):
        raise ValueError(TOO_DEEP)
    return value


def too_deep(value, limit: int = MAX_DEPTH) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


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
