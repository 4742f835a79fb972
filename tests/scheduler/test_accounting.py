"""The usage ledger against ledgers computed by hand, and its bookkeeping on random queues."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.accounting import Attempt, Terms, Waiting, account
from tests.scheduler.builders import LAB, LEND, RESERVE, share

H = 3600.0


def attempt(job, share_name, q, start, stop=None, *, priority=0, preempted="", first=True):
    return Attempt(
        job=job,
        key=(share_name, job),
        share=share_name,
        unit="gpu",
        quantity=q,
        gpus_per_instance=1,
        priority=priority,
        created_at=start,
        started_at=start,
        stopped_at=stop,
        preempted=preempted,
        first=first,
    )


def terms(*shares, since=0.0):
    return [Terms(s, since, (s.name,)) for s in shares]


def row(ledger, key, hour=0.0):
    return ledger[(hour, key)]


def test_a_borrower_reclaimed_splits_into_own_borrowed_and_preempted():
    # Capacity 4: the borrower's 4-instance job (limit 2) runs half an hour, then the
    # lender takes its 2 back by preempting it whole.
    big = attempt("big", "borrower", 4, 0, 1800, preempted="cross_share")
    mine = attempt("mine", "lender", 2, 1800)
    ledger = account(
        [big, mine],
        terms(share("lender", 2, LEND), share("borrower", 2, LAB)),
        [],
        {"gpu": 4},
        0,
        H,
    )
    b = row(ledger, ("borrower", "big"))
    assert (b.instance_seconds, b.own_instance_seconds, b.borrowed_instance_seconds) == (
        7200,
        3600,
        3600,
    )
    assert b.preempted == {"cross_share": 7200}
    m = row(ledger, ("lender", "mine"))
    assert (m.instance_seconds, m.own_instance_seconds, m.borrowed_instance_seconds) == (
        3600,
        3600,
        0,
    )
    # The lender lent its 2 idle instances for the half hour the borrower held them.
    assert row(ledger, ("lender", "gpu")).lent_instance_seconds == 3600
    assert row(ledger, ("borrower", "gpu")).lent_instance_seconds == 0
    assert row(ledger, ("borrower", "gpu")).entitled_instance_seconds == 2 * 3600


def test_the_lowest_priority_job_holds_the_borrowed_part_and_a_straddler_is_split():
    # Limit 3, two 2-instance jobs: 1 instance borrowed, attributed to the low-priority one.
    high = attempt("high", "s", 2, 0, priority=5)
    low = attempt("low", "s", 2, 100, 1100, priority=1)
    ledger = account([high, low], terms(share("s", 3, LAB)), [], {"gpu": 8}, 0, H)
    assert row(ledger, ("s", "low")).borrowed_instance_seconds == 1000  # 1 of its 2, 1000 s
    assert row(ledger, ("s", "low")).own_instance_seconds == 1000
    assert row(ledger, ("s", "high")).borrowed_instance_seconds == 0


def test_equal_priority_the_most_recent_start_borrows():
    first = attempt("first", "s", 2, 0)
    second = attempt("second", "s", 2, 600)
    ledger = account([first, second], terms(share("s", 2, LAB)), [], {"gpu": 4}, 0, H)
    assert row(ledger, ("s", "second")).borrowed_instance_seconds == 2 * 3000
    assert row(ledger, ("s", "first")).borrowed_instance_seconds == 0


def test_an_in_share_preemption_is_lost_work_of_its_kind():
    victim = attempt("v", "s", 1, 0, 900, priority=1, preempted="in_share")
    ledger = account([victim], terms(share("s", 1, LEND, in_share=True)), [], {"gpu": 1}, 0, H)
    assert row(ledger, ("s", "v")).preempted == {"in_share": 900}
    assert row(ledger, ("s", "v")).own_instance_seconds == 900


def test_a_reserve_share_idle_while_another_share_waits():
    # Capacity 4: RESERVE r holds 2 idle for the hour while o's second job waits for them.
    running = attempt("o1", "o", 2, 0)
    wait = Waiting("o", "gpu", 0, None)
    shares = terms(share("r", 2, RESERVE), share("o", 2, LAB))
    ledger = account([running], shares, [wait], {"gpu": 4}, 0, H)
    assert row(ledger, ("r", "gpu")).idle_while_waiting_instance_seconds == 2 * 3600
    assert row(ledger, ("r", "gpu")).lent_instance_seconds == 0
    # Nobody waited for o's capacity (its own waiting job does not count against it).
    assert row(ledger, ("o", "gpu")).idle_while_waiting_instance_seconds == 0
    # o's job waited while r held 2 idle: the other side of the same hour.
    assert row(ledger, ("o", "gpu")).waited_beside_idle_instance_seconds == 2 * 3600
    assert row(ledger, ("r", "gpu")).waited_beside_idle_instance_seconds == 0


def test_idle_capacity_counts_only_while_a_job_of_another_share_waits():
    wait = Waiting("o", "gpu", 1200, 1800)
    ledger = account(
        [], terms(share("r", 2, RESERVE), share("o", 2, LAB)), [wait], {"gpu": 4}, 0, H
    )
    assert row(ledger, ("r", "gpu")).idle_while_waiting_instance_seconds == 2 * 600


def test_an_attempt_spanning_the_period_boundary_is_cut_at_it():
    long = attempt("long", "s", 2, 1800, 5400)
    first_hour = account([long], terms(share("s", 1, LAB)), [], {"gpu": 4}, 0, H)
    assert row(first_hour, ("s", "long")).instance_seconds == 2 * 1800
    assert row(first_hour, ("s", "long")).borrowed_instance_seconds == 1800
    both = account([long], terms(share("s", 1, LAB)), [], {"gpu": 4}, 0, 2 * H)
    assert row(both, ("s", "long"), H).instance_seconds == 2 * 1800
    assert row(both, ("s", "long")).attempts == 1  # counted where it started
    assert (H, ("s", "long")) in both
    assert row(both, ("s", "long"), H).attempts == 0


def test_an_open_attempt_counts_up_to_the_end_of_the_period():
    ledger = account([attempt("open", "s", 3, 600)], terms(share("s", 3)), [], {"gpu": 3}, 0, 1200)
    assert row(ledger, ("s", "open")).instance_seconds == 3 * 600


def test_a_lowered_limit_turns_own_into_borrowed_from_that_moment():
    job = attempt("j", "s", 4, 0)
    history = terms(share("s", 4, LAB)) + terms(share("s", 2, LAB), since=1800)
    ledger = account([job], history, [], {"gpu": 4}, 0, H)
    assert row(ledger, ("s", "j")).own_instance_seconds == 4 * 1800 + 2 * 1800
    assert row(ledger, ("s", "j")).borrowed_instance_seconds == 2 * 1800
    assert row(ledger, ("s", "gpu")).entitled_instance_seconds == 4 * 1800 + 2 * 1800


def test_a_jobs_wait_is_counted_at_its_first_start():
    a = Attempt("j", ("s", "j"), "s", "gpu", 1, 1, 0, 100, 400, 500, first=True)
    retry = Attempt("j", ("s", "j"), "s", "gpu", 1, 1, 0, 100, 600, 700, first=False)
    ledger = account([a, retry], terms(share("s", 1)), [], {"gpu": 1}, 0, H)
    figures = row(ledger, ("s", "j"))
    assert (figures.jobs, figures.attempts, figures.waits) == (1, 2, [300])


def test_capacity_no_share_covers_is_borrowed_before_a_lenders():
    # Capacity 6, limits 2 + 2: 2 instances no share covers go first.
    big = attempt("big", "b", 4, 0)
    ledger = account([big], terms(share("b", 2, LAB), share("l", 2, LEND)), [], {"gpu": 6}, 0, H)
    assert row(ledger, ("l", "gpu")).lent_instance_seconds == 0
    bigger = attempt("bigger", "b", 5, 0)
    ledger = account([bigger], terms(share("b", 2, LAB), share("l", 2, LEND)), [], {"gpu": 6}, 0, H)
    assert row(ledger, ("l", "gpu")).lent_instance_seconds == 3600


@st.composite
def queues(draw):
    names = ["a", "b", "c"]
    strategies = st.sampled_from([LEND, RESERVE, LAB])
    shares = [share(n, draw(st.integers(0, 4)), draw(strategies)) for n in names]
    history = terms(*shares)
    if draw(st.booleans()):
        changed = share("a", draw(st.integers(0, 4)), LAB)
        history += terms(changed, since=float(draw(st.integers(0, 7200))))
    attempts = []
    for i in range(draw(st.integers(0, 12))):
        start = float(draw(st.integers(0, 7000)))
        stop = draw(st.one_of(st.none(), st.integers(int(start) + 1, 7200)))
        attempts.append(
            Attempt(
                job=f"j{i}",
                key=(draw(st.sampled_from(names)), f"j{i}"),
                share="",
                unit="gpu",
                quantity=draw(st.integers(1, 3)),
                gpus_per_instance=1,
                priority=draw(st.integers(0, 2)),
                created_at=start,
                started_at=start,
                stopped_at=None if stop is None else float(stop),
                preempted=draw(st.sampled_from(["", "cross_share"])),
            )
        )
    attempts = [
        Attempt(**{**{f: getattr(a, f) for f in a.__slots__}, "share": a.key[0]}) for a in attempts
    ]
    return attempts, history


@settings(max_examples=150, derandomize=True, deadline=None)
@given(queues(), st.integers(1, 7199))
def test_ledgers_add_up(queue, cut):
    attempts, history = queue
    whole = account(attempts, history, [], {"gpu": 8}, 0, 7200)
    first = account(attempts, history, [], {"gpu": 8}, 0, cut)
    rest = account(attempts, history, [], {"gpu": 8}, cut, 7200)
    for a in attempts:
        ran = min(7200, a.stopped_at or 7200) - a.started_at
        total = sum(f.instance_seconds for (_, key), f in whole.items() if key == a.key)
        assert abs(total - a.quantity * ran) < 1e-6
    for key in {key for _, key in whole}:

        def sums(ledger, key=key):
            rows = [f for (_, k), f in ledger.items() if k == key]
            return [
                round(sum(getattr(f, name) for f in rows), 6)
                for name in (
                    "instance_seconds",
                    "own_instance_seconds",
                    "borrowed_instance_seconds",
                    "lent_instance_seconds",
                    "preempted_instance_seconds",
                    "attempts",
                )
            ]

        assert sums(whole) == pytest.approx(
            [x + y for x, y in zip(sums(first), sums(rest), strict=True)]
        )
        instance, own, borrowed, *_ = sums(whole)
        assert own >= -1e-6
        assert borrowed >= -1e-6
        assert abs(own + borrowed - instance) < 1e-6


def test_time_runnable_is_counted_per_job_whatever_its_size():
    waits = [
        Waiting("o", "gpu", 600, 1800, ("o", "w1")),
        Waiting("o", "gpu", 3000, None, ("o", "w1")),  # requeued, still waiting at the end
    ]
    ledger = account([], terms(share("o", 2, LAB)), waits, {"gpu": 4}, 0, 2 * H)
    assert row(ledger, ("o", "w1")).runnable_seconds == 1200 + 600
    assert row(ledger, ("o", "w1"), H).runnable_seconds == 3600
