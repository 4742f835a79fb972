"""The fleet overview's figures and who may see it."""

from __future__ import annotations

import pytest

from quotaportal.tick.run import run_tick
from tests.builders import submit


@pytest.mark.django_db
def test_the_fleet_sums_each_queue_and_names_the_longest_wait(people, fleet, client):
    for name in ("a", "b"):
        submit(people.alice, fleet, name=name, quantity=2)
    submit(people.bob, fleet, share="nlp", name="c", quantity=2)
    submit(people.alice, fleet, name="d", quantity=1)
    run_tick(fleet.queue.id)  # a and c start on their own halves; b, the oldest waiter, and d wait
    client.force_login(people.bob)
    page = client.get("/fleet/")
    assert page.status_code == 200
    row = page.content.decode().split('data-queue="gpu"')[1].split("</tr>")[0]
    assert "4 of 4 a100" in row
    assert "0 instances" in row  # nothing borrowed, nothing lent
    assert "2 waiting" in row
    assert "nothing idle to borrow" in row
    fragment = client.get("/fleet/", headers={"HX-Request": "true"})
    assert fragment.content.decode().lstrip().startswith('<div id="live"')


@pytest.mark.django_db
def test_the_fleet_asks_who_is_looking(client):
    answer = client.get("/fleet/")
    assert answer.status_code == 302
    assert answer["Location"].startswith("/login/")
