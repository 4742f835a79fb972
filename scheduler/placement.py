"""Gang placement on hosts: all of a job's instances at once, on as few hosts as possible.

Pure and deterministic: hosts are named, free slots counted per host, ties broken by name.
"""

from __future__ import annotations

from collections.abc import Mapping


def place(quantity: int, free: Mapping[str, int]) -> list[tuple[str, int]] | None:
    """[(host, instances)] covering `quantity`, or None when the hosts cannot hold it all.

    One host when any can hold the whole job (the fullest such host, so larger holes stay
    open for larger jobs); otherwise the hosts with the most free slots first.
    """
    if quantity <= 0 or sum(free.values()) < quantity:
        return None
    fitting = [(slots, host) for host, slots in free.items() if slots >= quantity]
    if fitting:
        _, host = min(fitting)
        return [(host, quantity)]
    placement, needed = [], quantity
    for host, slots in sorted(free.items(), key=lambda item: (-item[1], item[0])):
        if slots <= 0:
            continue
        take = min(slots, needed)
        placement.append((host, take))
        needed -= take
        if not needed:
            return placement
    return None
