"""The dashboard chart in a browser: the window picker (keyboard too), and on a phone labels
that can be read and the chart opened at "now"."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.tick.run import run_tick
from tests.web.builders import shot, sign_in, submit_to_vision

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def busy(people, small_fleet):
    submit_to_vision(people.alice, small_fleet, "a", "b")
    run_tick(small_fleet.pk)
    return small_fleet


def test_the_window_picker_changes_the_chart_by_keyboard(browser, live_server, busy):
    page = sign_in(browser, live_server, "alice")
    expect(page.get_by_role("heading", name="Instances in use, last hour")).to_be_visible()
    page.locator("a[data-window='24h']").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Instances in use, last 24 h")).to_be_visible()
    expect(page.get_by_test_id("history-chart")).to_contain_text("−12 h")
    shot(page, "dashboard-chart")


def test_on_a_phone_the_chart_opens_at_now_with_labels_to_read(browser, live_server, busy):
    page = sign_in(browser, live_server, "alice")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/?queue=gpu")
    chart = page.get_by_test_id("history-chart")
    expect(chart).to_be_visible()
    wrap = page.locator(".chart-wrap").first
    assert wrap.evaluate("w => w.scrollLeft + w.clientWidth >= w.scrollWidth - 1"), "at now"
    label = chart.locator("text", has_text="now")
    shown = wrap.evaluate(
        """w => { const box = w.getBoundingClientRect();
                  const t = [...w.querySelectorAll("text")].find(e => e.textContent === "now")
                    .getBoundingClientRect();
                  return t.left >= box.left && t.right <= box.right + 0.5; }"""
    )
    assert shown, "the 'now' label is in the visible part of the chart"
    assert label.evaluate("t => t.getBoundingClientRect().height") >= 11, "readable"
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    shot(page, "dashboard-chart-phone")


@pytest.mark.parametrize("width", [390, 1280])
def test_no_chart_label_is_cut_by_the_chart_s_edge(browser, live_server, busy, width):
    page = sign_in(browser, live_server, "alice", width=width)
    page.goto(f"{live_server.url}/?queue=gpu")
    chart = page.get_by_test_id("history-chart")
    expect(chart).to_be_visible()
    cut = chart.evaluate(
        """svg => { const box = svg.getBoundingClientRect();
                    return [...svg.querySelectorAll("text")]
                      .map(t => [t.textContent, t.getBoundingClientRect()])
                      .filter(([, r]) => r.left < box.left - 0.5 || r.right > box.right + 0.5
                                       || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
                      .map(([text]) => text); }"""
    )
    assert cut == []
    # Scrolled to "now" on a phone, no label shows cut by the visible part's edge.
    halves = page.locator(".chart-wrap").first.evaluate(
        """w => { const view = w.getBoundingClientRect();
                  return [...w.querySelectorAll("svg text")]
                    .filter(t => getComputedStyle(t).visibility !== "hidden")
                    .map(t => [t.textContent, t.getBoundingClientRect()])
                    .filter(([, r]) => r.left < view.left - 0.5 || r.right > view.right + 0.5)
                    .map(([text]) => text); }"""
    )
    assert halves == []
