"""Single sign-on in a browser against a real OpenID Connect provider process (django-oauth-
toolkit, tests/oidc_provider): the first sign-in makes the account, its group claims put it in
two teams and make it an admin; at the next sign-in a group gone from the provider takes its
membership and the role away. A forged state or nonce is refused."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from quotaportal.identity import oidc
from quotaportal.identity.models import ProviderAccount
from quotaportal.quotas.models import Event, EventKind, Membership, Team
from quotaportal.quotas.services import accounts
from tests.web.builders import shot

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID, CLIENT_SECRET = "quotaportal", "a-test-client-secret-of-some-length"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Provider:
    """The provider process, its users and their groups."""

    def __init__(self, workdir: Path, portal_url: str):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}/o"
        self.portal_url = portal_url
        self.workdir = workdir
        self.env = {
            **os.environ,
            "QP_TEST_OIDC_DB": str(workdir / "provider.sqlite3"),
            "QP_TEST_OIDC_ISSUER": self.issuer,
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        }
        self.process = None

    def seed(self, groups: dict[str, list[str]]) -> None:
        spec = {
            "client": {
                "id": CLIENT_ID,
                "secret": CLIENT_SECRET,
                "redirect_uri": f"{self.portal_url}/oidc/callback/",
            },
            "users": [
                {
                    "username": u,
                    "password": f"pw-{u}-provider",
                    "email": f"{u}@example.org",
                    "groups": g,
                }
                for u, g in groups.items()
            ],
        }
        path = self.workdir / "seed.json"
        path.write_text(json.dumps(spec))
        self._run("seed", str(path)).check_returncode()

    def _run(self, *args):
        return subprocess.run(
            [sys.executable, "-m", "tests.oidc_provider.provider", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.oidc_provider.provider", "serve", str(self.port)],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.issuer}/.well-known/openid-configuration", timeout=2).ok:
                    return
            except requests.ConnectionError:
                time.sleep(0.2)
        raise RuntimeError("the test provider did not start")

    def stop(self) -> None:
        if self.process:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def provider(tmp_path, live_server, settings):
    found = Provider(tmp_path, live_server.url)
    found.seed({"carol": ["team-vision", "team-nlp", "portal-admins", "all-staff"]})
    found.start()
    settings.QP_OIDC_ISSUER = found.issuer
    settings.QP_OIDC_CLIENT_ID = CLIENT_ID
    settings.QP_OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.QP_OIDC_NAME = "Example IdP"
    settings.QP_OIDC_ADMIN_GROUP = "portal-admins"
    oidc.forget_discovery()
    yield found
    found.stop()
    oidc.forget_discovery()


def new_page(browser, width=1280):
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 640 else 844})
    return context.new_page()


def sign_in_at_provider(page, live_server, username: str) -> None:
    """From the portal's sign-in page, by keyboard, through the provider's own log-in form."""
    page.goto(f"{live_server.url}/login/")
    page.get_by_role("link", name="Sign in with Example IdP").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Example identity provider")).to_be_visible()
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"pw-{username}-provider")
    page.get_by_label("Password").press("Enter")


def teams_of(user) -> dict[str, bool]:
    """Team name → whether the membership comes from the provider."""
    return {
        m.team.name: m.from_provider
        for m in Membership.objects.filter(user=user).select_related("team")
    }


def test_the_provider_makes_the_account_its_teams_and_admin_and_takes_them_back(
    browser, live_server, provider
):
    page = new_page(browser)
    page.goto(f"{live_server.url}/login/")
    shot(page, "sign-in")
    sign_in_at_provider(page, live_server, "carol")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    expect(page.locator(".who")).to_contain_text("carol (admin)")

    carol = get_user_model().objects.get(username="carol")
    assert carol.email == "carol@example.org"
    assert carol.is_staff
    assert carol.is_superuser
    assert not carol.has_usable_password()
    assert teams_of(carol) == {"vision": True, "nlp": True}  # all-staff matches no rule
    account = ProviderAccount.objects.get(user=carol)
    assert account.issuer == provider.issuer
    assert "team-nlp" in account.groups
    signed_in = Event.objects.get(kind=EventKind.SIGNED_IN, actor=carol)
    assert signed_in.detail["method"] == "single sign-on"
    assert Event.objects.filter(
        kind=EventKind.RESOURCE_CHANGED,
        detail__action="added",
        detail__team="nlp",
        detail__source="identity provider",
    ).exists()

    # The console shows where the membership comes from, and offers no Remove for it.
    page.goto(f"{live_server.url}/manage/teams/{Team.objects.get(name='nlp').pk}/")
    row = page.locator('tr[data-member="carol"]')
    expect(row).to_contain_text("from the identity provider")
    expect(row.get_by_role("button", name="Remove")).to_have_count(0)
    shot(page, "team-members-from-provider")
    # A membership an admin makes here is the portal's own, and outlives the next sign-in.
    ops = Team.objects.create(name="ops")
    accounts.set_member(None, ops, carol, is_admin=False)

    page.get_by_role("button", name="Sign out").press("Enter")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert Event.objects.filter(kind=EventKind.SIGNED_OUT, actor=carol).exists()

    provider.seed({"carol": ["team-vision", "all-staff"]})  # out of nlp and of the admins
    sign_in_at_provider(page, live_server, "carol")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    expect(page.locator(".who")).not_to_contain_text("(admin)")
    carol.refresh_from_db()
    assert not carol.is_staff
    assert not carol.is_superuser
    assert teams_of(carol) == {"vision": True, "ops": False}
    assert get_user_model().objects.filter(username="carol").count() == 1  # the same account
    assert Event.objects.filter(
        kind=EventKind.RESOURCE_CHANGED, detail__action="removed", detail__team="nlp"
    ).exists()
    assert Event.objects.filter(detail__action="took admin from", detail__name="carol").exists()


def start_flow(page, live_server, change_nonce: bool = False) -> None:
    """Begin a sign-in; with change_nonce the portal's redirect to the provider carries another
    nonce than the one the portal keeps (what an injected or replayed response would)."""

    def forge(route):
        answer = route.fetch(max_redirects=0)
        parts = urlsplit(answer.headers["location"])
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        query["nonce"] = "forged-" + query["nonce"]
        forged = parts._replace(query=urlencode(query)).geturl()
        route.fulfill(response=answer, headers={**answer.headers, "location": forged})

    if change_nonce:
        page.context.route(lambda url: "/oidc/authenticate/" in url, forge)
    sign_in_at_provider(page, live_server, "carol")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_forged_nonce_is_refused(browser, live_server, provider, width):
    page = new_page(browser, width)
    start_flow(page, live_server, change_nonce=True)
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Sign-in refused")
    expect(alert).to_contain_text("nonce does not match")
    expect(page.get_by_role("link", name="Dashboard")).to_have_count(0)  # not signed in
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    refused = Event.objects.get(kind=EventKind.SIGN_IN_REFUSED)
    assert refused.detail["method"] == "single sign-on"
    assert "nonce" in refused.detail["reason"]
    assert not Event.objects.filter(kind=EventKind.SIGNED_IN).exists()
    if width < 640:
        shot(page, "sign-in-refused-phone")


def test_a_forged_state_is_refused(browser, live_server, provider):
    page = new_page(browser)
    page.goto(f"{live_server.url}/oidc/authenticate/")  # the portal keeps a state, goes off
    expect(page.get_by_role("heading", name="Example identity provider")).to_be_visible()
    answer = page.goto(f"{live_server.url}/oidc/callback/?code=stolen&state=forged")
    assert answer.status == 400
    expect(page.get_by_role("alert")).to_contain_text("unknown state")
    assert not Event.objects.filter(kind=EventKind.SIGNED_IN).exists()
    assert not get_user_model().objects.filter(username="carol").exists()
