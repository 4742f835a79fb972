"""A queue of many shares on the dashboard in a browser, by keyboard, at 1280 px and on a
phone: the busiest as cards, a share found by name with Enter, then Show all.
Screenshots: test-artifacts/dashboard-many-shares-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.tick.run import run_tick
from quotaportal.web.dashboard_cards import CARDS
from tests.builders import add_share, build_queue
from tests.web.builders import PASSWORD, shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)
SHARES = CARDS + 4


@pytest.fixture
def many_shares(people):
    _, queue = build_queue(people.admin, capacity=SHARES)
    for index in range(SHARES):
        add_share(people.admin, queue, f"team-{index:02d}", "vision", 1, "LEND")
    people.bob.set_password(PASSWORD)
    people.bob.save()
    run_tick(queue.id)
    return queue


@pytest.mark.parametrize("width", [1280, 390])
def test_find_a_hidden_share_by_keyboard_then_show_all(browser, live_server, many_shares, width):
    page = sign_in(browser, live_server, "bob", width=width)
    cards = page.locator("section.card[data-share]")
    expect(cards).to_have_count(CARDS)
    expect(page.get_by_test_id("more-shares")).to_contain_text("4 more")
    box = page.get_by_test_id("more-shares").bounding_box()
    assert box["x"] + box["width"] <= width
    hidden = f"team-{SHARES - 1:02d}"  # no jobs anywhere: the last by name is hidden
    expect(page.locator(f'section.card[data-share="{hidden}"]')).to_have_count(0)
    find = page.get_by_label("Find a share")
    find.fill(hidden)
    find.press("Enter")
    expect(page.locator(f'section.card[data-share="{hidden}"]')).to_be_visible()
    shot(page, f"dashboard-many-shares-{width}")
    page.get_by_role("link", name=f"Show all {SHARES} shares").focus()
    page.keyboard.press("Enter")
    expect(cards).to_have_count(SHARES)
    page.context.close()
