"""Reservations through the REST API: admins add and cancel them, everyone may list them, bad
input gets a 400 naming the field."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from quotaportal.quotas.models import Event, Reservation

pytestmark = pytest.mark.django_db

URL = "/api/v1/service-environments/sim/reservations/"


def window(hours_from: float, hours_to: float, **fields) -> dict:
    now = timezone.now()
    return {
        "name": "plan-a",
        "capacity_unit": "a100",
        "instances": 2,
        "starts_at": (now + timedelta(hours=hours_from)).isoformat(),
        "ends_at": (now + timedelta(hours=hours_to)).isoformat(),
        **fields,
    }


def test_an_admin_reserves_lists_and_cancels(as_user, fleet):
    admin = as_user("ada")
    created = admin.post(URL, window(1, 3), format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["state"] == "UPCOMING"
    listed = as_user("alice").get(URL).json()
    assert [r["name"] for r in listed] == ["plan-a"]
    cancelled = admin.delete(f"{URL}plan-a/")
    assert cancelled.json() == {"name": "plan-a", "outcome": "deleted"}
    assert not Reservation.objects.exists()
    assert admin.delete(f"{URL}plan-a/").status_code == 404
    assert Event.objects.filter(detail__resource="reservation").count() == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (window(3, 1), "ends_at"),
        (window(-3, -1), "ends_at"),
        (window(1, 3, instances=0), "instances"),
        (window(1, 3, instances="many"), "instances"),
        (window(1, 3, capacity_unit="b200"), "capacity_unit"),
        (window(1, 3, name=""), "name"),
        (window(1, 3, starts_at="tomorrow"), "starts_at"),
    ],
)
def test_bad_reservations_get_a_400_naming_the_field(as_user, fleet, body, field):
    answer = as_user("ada").post(URL, body, format="json")
    assert answer.status_code == 400
    assert field in answer.json()
    assert not Reservation.objects.exists()


def test_a_scientist_may_not_reserve_or_cancel(as_user, fleet):
    assert as_user("alice").post(URL, window(1, 3), format="json").status_code == 403
    as_user("ada").post(URL, window(1, 3), format="json")
    assert as_user("alice").delete(f"{URL}plan-a/").status_code == 403
    assert Reservation.objects.count() == 1
    assert as_user(None).get(URL).status_code == 401


def test_a_duplicate_name_is_refused(as_user, fleet):
    admin = as_user("ada")
    admin.post(URL, window(1, 3), format="json")
    again = admin.post(URL, window(1, 3), format="json")
    assert again.status_code == 400
    assert "already has a reservation named plan-a" in again.json()["name"][0]
