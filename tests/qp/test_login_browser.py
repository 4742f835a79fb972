"""`qp login --browser`: the portal's page makes a token once the signed-in person agrees,
and hands it only to the qp listening on this computer's loopback address."""

from __future__ import annotations

import io
import re

import pytest
import requests
from django.test import Client
from rich.console import Console

from qp import login
from quotaportal.quotas.models import PersonalToken

pytestmark = pytest.mark.django_db


def test_the_browser_brings_a_new_token_back_to_the_waiting_qp(people):
    browser = Client()
    browser.force_login(people.alice)

    def open_browser(address: str) -> None:
        path = address.split("testserver", 1)[-1]
        page = browser.get(path)
        assert page.status_code == 200
        assert "qp on laptop-7" in page.content.decode()
        fields = dict(
            re.findall(r'name="(port|state|host)" value="([^"]*)"', page.content.decode())
        )
        agreed = browser.post("/account/tokens/cli/", fields)
        assert agreed.status_code == 302
        assert agreed["Location"].startswith("http://127.0.0.1:")
        requests.get(agreed["Location"], timeout=5)  # the browser follows the redirect

    token = login.by_browser(
        "http://testserver", "laptop-7", Console(file=io.StringIO()), open_browser=open_browser
    )
    made = PersonalToken.objects.get(user=people.alice, name="qp on laptop-7")
    assert token.startswith(made.prefix)
    assert made.name == "qp on laptop-7"
    assert made.expires_at is not None


@pytest.mark.parametrize(
    "query",
    [
        "port=80&state=" + "a" * 20,
        "port=9000&state=short",
        "port=9000&state=" + "a" * 20 + "&host=a/b",
        "port=x&state=" + "a" * 20,
    ],
)
def test_a_link_qp_did_not_make_makes_no_token(people, client, query):
    client.force_login(people.alice)
    page = client.get(f"/account/tokens/cli/?{query}")
    assert page.status_code == 400
    assert "qp login --browser" in page.content.decode()
    assert client.post(f"/account/tokens/cli/?{query}", {}).status_code == 400
    assert not PersonalToken.objects.filter(name__startswith="qp on").exists()


def test_the_agreement_needs_the_pages_csrf_token_and_a_signed_in_person(people):
    careful = Client(enforce_csrf_checks=True)
    careful.force_login(people.alice)
    fields = {"port": "9000", "state": "b" * 24, "host": "x"}
    assert careful.post("/account/tokens/cli/", fields).status_code == 403
    anonymous = Client()
    assert anonymous.get("/account/tokens/cli/?port=9000&state=" + "b" * 24).status_code == 302
    assert not PersonalToken.objects.filter(name__startswith="qp on").exists()
