"""A dashboard refresh with nothing new sends nothing: htmx gets an empty 204 and keeps the
page as it is; anything new (a submit, a tick's dispatch) answers with the fragment again."""

from __future__ import annotations

import re
from types import SimpleNamespace

from django.utils import timezone

from quotaportal.tick.run import run_tick
from quotaportal.web.views import dashboard as dashboard_view
from tests.builders import submit


def version_of(response) -> str:
    return re.search(r'data-version="(\w+)"', response.content.decode())[1]


def test_an_unchanged_dashboard_answers_204_and_a_change_answers_the_fragment(
    client, people, fleet, monkeypatch
):
    # The version holds the minute (the chart's axis moves): one minute for the whole test,
    # or a run that crosses a minute's end sees a change that is not the one asserted.
    minute = timezone.now()
    monkeypatch.setattr(dashboard_view, "timezone", SimpleNamespace(now=lambda: minute))
    client.force_login(people.alice)
    url = f"/?queue={fleet.queue.name}"
    first = client.get(url, HTTP_HX_REQUEST="true")
    assert first.status_code == 200
    version = version_of(first)
    unchanged = client.get(url, {"since": version}, HTTP_HX_REQUEST="true")
    assert (unchanged.status_code, unchanged.content) == (204, b"")

    submit(people.alice, fleet, name="new-work")
    after_submit = client.get(url, {"since": version}, HTTP_HX_REQUEST="true")
    assert after_submit.status_code == 200
    version = version_of(after_submit)
    run_tick(fleet.queue.pk)
    after_tick = client.get(url, {"since": version}, HTTP_HX_REQUEST="true")
    assert after_tick.status_code == 200, "the tick dispatched the job: the bars change"
    assert version_of(after_tick) != version


def test_a_full_page_load_always_renders(client, people, fleet):
    client.force_login(people.alice)
    page = client.get(f"/?queue={fleet.queue.name}")
    again = client.get(f"/?queue={fleet.queue.name}", {"since": version_of(page)})
    assert again.status_code == 200, "only htmx refreshes may be answered with nothing"
