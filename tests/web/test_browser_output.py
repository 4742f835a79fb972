"""A job's whole output on its page: followed as it arrives, by a keyboard user too, at
desktop and phone widths; and the array pages at both widths."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.jobs.output import append_output
from quotaportal.quotas import services
from quotaportal.quotas.models import JobAttempt
from tests.web.builders import shot, sign_in, submit_to_vision

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_job_page_follows_the_output_to_its_end(
    browser, live_server, small_fleet, people, width
):
    (job,) = submit_to_vision(people.alice, small_fleet, "printer")
    attempt = JobAttempt.objects.create(job=job, number=1)
    first = b"".join(b"epoch %d loss 0.%d\n" % (i, i) for i in range(3000))
    append_output(attempt.pk, 0, 0, first)
    page = sign_in(browser, live_server, "alice", width)
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    output = page.locator("#output-text")
    expect(output).to_contain_text("epoch 2999 loss")
    expect(page.locator("#output-state")).to_contain_text("waiting for more")
    append_output(attempt.pk, 0, len(first), b"training done\n", final=True)
    expect(output).to_contain_text("training done")
    expect(page.locator("#output-state")).to_contain_text(f"All of it: {len(first) + 14:,} bytes")
    assert output.evaluate("e => e.textContent.length") == len(first) + 14
    page.locator("#output-text").focus()  # reachable by keyboard, to scroll it with the keys
    expect(page.locator("#output-text")).to_be_focused()
    shot(page, f"job-output-{width}")
    page.context.close()


def test_another_team_sees_no_output_section(browser, live_server, small_fleet, people):
    (job,) = submit_to_vision(people.alice, small_fleet, "private")
    page = sign_in(browser, live_server, "bob")
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    expect(page.get_by_text("shown to its team and to admins")).to_be_visible()
    expect(page.locator("#whole-output")).to_have_count(0)
    assert page.request.get(f"{live_server.url}/jobs/{job.pk}/output/").status == 403
    page.context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_array_page_by_keyboard(browser, live_server, small_fleet, people, width):
    array = services.submit_array(
        people.alice,
        size=6,
        max_running=2,
        job_queue=small_fleet,
        quota_share="vision",
        capacity_unit="a100",
        name="sweep",
    )
    page = sign_in(browser, live_server, "alice", width)
    page.goto(f"{live_server.url}/arrays/")
    page.get_by_role("link", name="sweep").click()
    expect(page.get_by_test_id("counts")).to_contain_text("4 PENDING")
    box = page.get_by_label("Priority")
    box.fill("42")
    box.press("Enter")
    expect(page.get_by_role("status").or_(page.locator(".messages"))).to_contain_text(
        "priority 42 for 6 jobs"
    )
    shot(page, f"array-{width}")
    assert set(array.children.values_list("scheduling_priority", flat=True)) == {42}
    page.context.close()
