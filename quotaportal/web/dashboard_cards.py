"""Which shares the dashboard draws as cards and lines: all of a queue's shares when they
are few, else the busiest (most jobs running and waiting, then most borrowed) and the rest
summed in one line of words and one "other shares" area of the chart. Two hundred cards are
more than a person reads and most of a 380 KB refresh every two seconds; "Show all" and
finding a share by name bring any one back."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

CARDS = 16  # shares drawn as cards before the rest are summed
OTHERS = "other shares"


@dataclass
class Cards:
    shown: list[dict]  # the dashboard's share rows drawn as cards, in name order
    hidden: int = 0
    hidden_running: int = 0
    hidden_waiting: int = 0


def _activity(row: dict) -> tuple:
    borrowed = sum(unit["borrowed"] for unit in row["units"])
    return (-(row["running"] + row["runnable"]), -borrowed, row["share"].name)


def pick_cards(rows: list[dict], *, show_all: bool, find: str = "") -> Cards:
    """The rows to draw: every one (few shares, or "Show all"), the one asked for by name
    with the busiest, or the busiest CARDS."""
    if show_all or len(rows) <= CARDS:
        return Cards(rows)
    found = [row for row in rows if find and find.lower() in row["share"].name.lower()]
    busiest = sorted(rows, key=_activity)[: max(0, CARDS - len(found[:CARDS]))]
    chosen = {row["share"].pk for row in [*found[:CARDS], *busiest]}
    shown = [row for row in rows if row["share"].pk in chosen]
    hidden = [row for row in rows if row["share"].pk not in chosen]
    return Cards(
        shown,
        len(hidden),
        sum(row["running"] for row in hidden),
        sum(row["runnable"] for row in hidden),
    )


def folded_samples(samples: list, shown: set[str]) -> list:
    """The usage samples with every share not in `shown` summed into OTHERS."""
    folded = []
    for sample in samples:
        used: dict[str, dict[str, int]] = {}
        others: dict[str, int] = {}
        for share, units in sample.used.items():
            if share in shown:
                used[share] = units
            else:
                for unit, n in units.items():
                    others[unit] = others.get(unit, 0) + n
        if others:
            used[OTHERS] = others
        folded.append(SimpleNamespace(time=sample.time, used=used))
    return folded
