"""A queue of many shares on the dashboard: the busiest as cards, the rest in one line and
one "other shares" area of the chart; Show all and Find bring any share back; a queue of a
few shares looks as it always did."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.test import Client

from quotaportal.quotas import services
from quotaportal.tick.run import run_tick
from quotaportal.web.dashboard_cards import CARDS, OTHERS, folded_samples, pick_cards
from tests.builders import add_share, build_queue

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
SHARES = CARDS + 4
NAMES = [f"busy-{i:02d}" if i in (3, 17) else f"idle-{i:02d}" for i in range(SHARES)]


@pytest.fixture
def many_shares(people):
    """SHARES one-GPU shares; only busy-03 and busy-17 have jobs."""
    _, queue = build_queue(people.admin, capacity=SHARES)
    for name in NAMES:
        add_share(people.admin, queue, name, "vision", 1, "LEND_AND_BORROW")
    for share in ("busy-03", "busy-17"):
        services.submit_job(
            people.alice, job_queue=queue, quota_share=share, name=f"{share}-job",
            capacity_unit="a100", quantity=2,
        )  # fmt: skip
    run_tick(queue.id)
    return queue


def cards(html: str) -> list[str]:

    return re.findall(
        r'<section class="card" aria-labelledby="share-\d+" data-share="([^"]+)"', html
    )


def test_the_busiest_shares_are_cards_and_the_rest_a_line(people, many_shares):
    client = Client()
    client.force_login(people.bob)
    page = client.get("/?queue=gpu", **HTMX).content.decode()
    shown = cards(page)
    assert len(shown) == CARDS
    assert {"busy-03", "busy-17"} <= set(shown)
    assert shown == sorted(shown), "cards stay in name order"
    assert "; 4 more with 0 running and 0 waiting" in page
    assert f"Show all {SHARES} shares" in page
    everything = client.get("/?queue=gpu&shares=all", **HTMX).content.decode()
    assert len(cards(everything)) == SHARES
    assert "&amp;shares=all" in everything, "the live refresh keeps showing all"


def test_a_share_found_by_name_gets_its_card(people, many_shares):
    client = Client()
    client.force_login(people.bob)
    shown = cards(client.get("/?queue=gpu", **HTMX).content.decode())
    hidden = sorted(set(NAMES) - set(shown))[0]
    page = client.get(f"/?queue=gpu&share={hidden.upper()}", **HTMX).content.decode()
    assert hidden in cards(page)
    assert len(cards(page)) == CARDS
    whole = client.get(f"/?queue=gpu&share={hidden.upper()}").content.decode()
    assert f'value="{hidden.upper()}"' in whole, "the box keeps what was asked for"
    hostile = client.get("/?queue=gpu&share=" + "<script>" * 100, **HTMX)
    assert hostile.status_code == 200
    assert "<script><script>" not in hostile.content.decode()


def test_a_queue_of_few_shares_shows_every_card_and_no_extra_line(people, fleet):
    client = Client()
    client.force_login(people.bob)
    page = client.get("/?queue=gpu", **HTMX).content.decode()
    assert sorted(cards(page)) == ["nlp", "vision"]
    assert 'data-testid="more-shares"' not in page


def row(name: str, running=0, waiting=0, borrowed=0) -> dict:
    share = SimpleNamespace(name=name, pk=name)
    return {
        "share": share,
        "running": running,
        "runnable": waiting,
        "units": [{"borrowed": borrowed}],
    }


def test_cards_are_picked_by_jobs_then_borrowing_then_name():
    rows = [row(f"s{i:02d}") for i in range(CARDS + 3)]
    rows[5] = row("s05", borrowed=3)
    rows[-1] = row(rows[-1]["share"].name, waiting=1)
    picked = pick_cards(rows, show_all=False)
    names = [r["share"].name for r in picked.shown]
    assert rows[-1]["share"].name in names
    assert "s05" in names
    assert names == sorted(names)
    assert picked.hidden == 3
    assert len(pick_cards(rows, show_all=True).shown) == len(rows)


def test_hidden_shares_are_one_area_of_the_chart():
    at = datetime(2026, 12, 4, tzinfo=UTC)
    samples = [SimpleNamespace(time=at, used={"a": {"gpu": 2}, "b": {"gpu": 1}, "c": {"h100": 4}})]
    (folded,) = folded_samples(samples, {"a"})
    assert folded.used == {"a": {"gpu": 2}, OTHERS: {"gpu": 1, "h100": 4}}
