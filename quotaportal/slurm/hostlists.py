"""Slurm's host lists ("gpu[01-03,07],login1") as names: the one piece of Slurm's syntax the
portal must read itself (a job's nodes), written out so `scontrol show hostnames` need not be
run once per job."""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand(hostlist: str) -> list[str]:
    """ "n[1-3],gpu05" -> ["n1", "n2", "n3", "gpu05"]; zero padding kept ("[01-03]")."""
    names: list[str] = []
    for part in _split_top(hostlist.strip()):
        if part and part != "(null)":
            names.extend(_expand_one(part))
    return names


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current.append(char)
    parts.append("".join(current))
    return parts


def _expand_one(name: str) -> list[str]:
    start = name.find("[")
    if start < 0:
        return [name]
    end = name.index("]", start)
    prefix, ranges, rest = name[:start], name[start + 1 : end], name[end + 1 :]
    tails = _expand_one(rest) if rest else [""]
    names = []
    for piece in ranges.split(","):
        match = _RANGE.match(piece)
        if match is None:
            raise ValueError(f"not a Slurm host list: {name!r}")
        low, high = match[1], match[2] or match[1]
        for number in range(int(low), int(high) + 1):
            names.extend(f"{prefix}{number:0{len(low)}d}{tail}" for tail in tails)
    return names
