"""Numbers for people, and a what-if's changes and verdict in words."""

from __future__ import annotations

import pytest

from quotaportal.web.numbers import duration, instance_hours, ratio, starts_in
from quotaportal.web.whatif_explained import better, draft_changes, verdict


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "—"),
        (0, "0 s"),
        (0.42, "0.4 s"),
        (42, "42 s"),
        (59.6, "1 min"),
        (130, "2 min 10 s"),
        (3600, "1 h"),
        (3725, "1 h 2 min"),
        (1395020.1, "16 d 3 h"),
        (-130, "−2 min 10 s"),
    ],
)
def test_durations_read_in_their_two_largest_units(seconds, shown):
    assert duration(seconds) == shown


def test_instance_hours_and_ratios_carry_their_units():
    assert instance_hours(0.016) == "0.02 instance-hours"
    assert instance_hours(12.54) == "12.5 instance-hours"
    assert instance_hours(1234.5) == "1,234 instance-hours"
    assert ratio(1.2874) == "1.29×"
    assert ratio(None) == "—"


TODAY = {
    "capacity": {"a100": 4},
    "shares": [
        {
            "name": "nlp",
            "limits": {"a100": 2},
            "strategy": "LEND",
            "borrow_limit": -1,
            "in_share_preemption": False,
            "state": "ENABLED",
            "team": "nlp",
            "remove": False,
        },
        {
            "name": "vision",
            "limits": {"a100": 2},
            "strategy": "LEND_AND_BORROW",
            "borrow_limit": -1,
            "in_share_preemption": True,
            "state": "ENABLED",
            "team": "vision",
            "remove": False,
        },
    ],
}


def test_the_draft_changes_are_listed_against_today():
    draft = {
        "capacity": {"a100": 6},
        "shares": [
            {**TODAY["shares"][0], "remove": True},
            {**TODAY["shares"][1], "borrow_limit": 50, "in_share_preemption": False},
            {"name": "ml", "limits": {"a100": 1}, "strategy": "RESERVE", "team": "nlp"},
        ],
    }
    assert draft_changes(TODAY, draft) == [
        "Capacity: 4 a100 → 6 a100",
        "Share nlp removed (its unfinished jobs are terminated)",
        "Share vision: borrow limit unlimited → 50 %",
        "Share vision: in-share preemption on → off",
        "New share ml for team nlp: 1 a100, RESERVE",
    ]
    assert draft_changes(TODAY, TODAY) == []


def test_the_verdict_names_what_moved_and_ignores_what_did_not():
    today = {
        "wait_p90_s": 10800,
        "wait_p50_s": 600,
        "makespan_s": 7200,
        "preemptions": 5,
        "idle_instance_hours_while_waiting": 3.0,
    }
    draft = {
        "wait_p90_s": 2400,
        "wait_p50_s": 610,
        "makespan_s": 7210,
        "preemptions": 3,
        "idle_instance_hours_while_waiting": 3.05,
    }
    assert verdict(today, draft) == (
        "With the draft, waits p90 fall from 3 h to 40 min; 2 fewer preemptions."
    )
    assert verdict(today, today).startswith("The draft changes little")
    assert better(10800, 2400) == "better"
    assert better(600, 610) == ""
    assert better(3, 5) == "worse"


def test_an_estimate_never_says_in_about_0_minutes():
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    assert starts_in(now + timedelta(seconds=130), now) == "in about 2 min"
    assert starts_in(now + timedelta(seconds=20), now) == "within a minute"
    assert starts_in(now - timedelta(seconds=95), now) == (
        "overdue: expected 1 min 35 s ago, still waiting"
    )
    assert starts_in(None, now) == "no estimate yet"
