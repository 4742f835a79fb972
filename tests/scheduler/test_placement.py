"""Gang placement on as few hosts as possible."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.placement import place


def test_a_job_that_fits_on_one_host_uses_the_fullest_host_that_holds_it():
    assert place(2, {"a": 4, "b": 2, "c": 3}) == [("b", 2)]


def test_a_job_larger_than_any_host_spans_the_emptiest_hosts_first():
    assert place(5, {"a": 2, "b": 3, "c": 1}) == [("b", 3), ("a", 2)]


def test_a_job_that_cannot_fit_is_not_placed():
    assert place(4, {"a": 2, "b": 1}) is None
    assert place(1, {}) is None


@given(st.integers(1, 12), st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 6)))
def test_placements_use_whole_free_slots_and_the_fewest_hosts(quantity, free):
    result = place(quantity, free)
    if sum(free.values()) < quantity:
        assert result is None
        return
    assert sum(n for _, n in result) == quantity
    assert all(0 < n <= free[host] for host, n in result)
    largest_first = sorted(free.values(), reverse=True)
    fewest = next(k for k in range(1, len(largest_first) + 1) if sum(largest_first[:k]) >= quantity)
    assert len(result) == fewest
