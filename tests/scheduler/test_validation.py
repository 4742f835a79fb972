"""The input rules every interface shares, with messages that say what to fix."""

from __future__ import annotations

import pytest

from scheduler import Share, Strategy, share_config_errors, submission_error
from scheduler.validation import priority_error

LAB = Strategy.LEND_AND_BORROW


def test_submission_within_reach_is_accepted():
    assert submission_error(Share("a", {"gpu": 2}, LAB, 100), "gpu", 4, {"gpu": 8}) is None


@pytest.mark.parametrize(
    ("share", "unit", "quantity", "message"),
    [
        (Share("a", {"gpu": 2}, enabled=False), "gpu", 1, "DISABLED and accepts no new jobs"),
        (Share("a", {"gpu": 2}), "gpu", 0, "quantity must be a whole number of at least 1"),
        (Share("a", {"gpu": 2}), "tpu", 1, "has no capacity limit for tpu (its units: gpu)"),
        (Share("a", {"gpu": 2}, LAB, 50), "gpu", 4, "can use at most 3 (its limit 2 plus borrow"),
        (Share("a", {"gpu": 2}, Strategy.LEND), "gpu", 3, "as LEND never borrows"),
        (Share("a", {"gpu": 2}, LAB), "gpu", 9, "the service environment has at most 8"),
    ],
)
def test_submission_that_can_never_fit_is_rejected(share, unit, quantity, message):
    assert message in submission_error(share, unit, quantity, {"gpu": 8})


def test_valid_share_settings_have_no_errors():
    assert share_config_errors({"gpu": 1}, "LEND_AND_BORROW", 200) == {}
    assert share_config_errors({"a": 1, "b": 2}, "RESERVE", None) == {}
    assert share_config_errors({"a": 1}, "LEND", -1) == {}


@pytest.mark.parametrize(
    ("limits", "strategy", "borrow", "field", "message"),
    [
        ({}, "LEND", None, "capacity_limits", "between 1 and 5"),
        ({f"u{i}": 1 for i in range(6)}, "LEND", None, "capacity_limits", "got 6"),
        ({"gpu": 0}, "LEND", None, "capacity_limits", "from 1 to 1,000,000 (check gpu)"),
        ({"gpu": 1}, "SHARE", None, "sharing_strategy", "must be one of RESERVE, LEND"),
        ({"gpu": 1}, "LEND_AND_BORROW", -2, "borrow_limit", "from -1 to 1,000,000"),
        ({"gpu": 1}, "RESERVE", 100, "borrow_limit", "only to the LEND_AND_BORROW"),
    ],
)
def test_bad_share_settings_name_the_field_and_rule(limits, strategy, borrow, field, message):
    errors = share_config_errors(limits, strategy, borrow)
    assert message in errors[field]


@pytest.mark.parametrize(
    ("value", "ok"),
    [(0, True), (9999, True), (-1, False), (10000, False), ("5", False), (True, False)],
)
def test_priority_range(value, ok):
    assert (priority_error(value) is None) is ok
