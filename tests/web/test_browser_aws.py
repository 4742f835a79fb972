"""An AWS_BATCH share changed in the AWS console, in a browser: the share's page shows both
values, adopting AWS's changes the share, and the page fits a phone. Screenshots:
test-artifacts/aws-drift-*.png."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from quotaportal.awsbatch.models import MirroredResource, MirrorKind
from quotaportal.awsbatch.sync.comparable import share_config
from quotaportal.quotas import services
from quotaportal.quotas.models import Team
from quotaportal.quotas.services.shares import limits_of
from tests.web.builders import PASSWORD, shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)
UNIT = "ml.g5.xlarge"


@pytest.fixture
def drifted(people):
    admin = people.admin
    admin.set_password(PASSWORD)
    admin.save()
    services.create_capacity_unit(admin, name=UNIT)
    env = services.create_service_environment(
        admin, name="sagemaker", backend="AWS_BATCH", region="us-west-2", capacity_limits={UNIT: 4}
    )
    queue = services.create_job_queue(
        admin,
        name="gpu-queue",
        scheduling_policy=services.create_scheduling_policy(admin, name="fifo"),
        service_environment=env,
    )
    share = services.create_share(
        admin,
        job_queue=queue,
        name="QS1",
        team=Team.objects.get(name="vision"),
        capacity_limits={UNIT: 2},
        sharing_strategy="LEND_AND_BORROW",
        borrow_limit=200,
    )
    MirroredResource.objects.create(
        environment=env,
        kind=MirrorKind.SHARE,
        name="gpu-queue/QS1",
        synced=share_config(share),
        aws={**share_config(share), "capacity_limits": {UNIT: 3}},
        drift_at=timezone.now(),
    )
    return share


def test_an_admin_adopts_awss_value_from_the_shares_page(browser, live_server, drifted):
    page = sign_in(browser, live_server, "ada")
    page.goto(f"{live_server.url}/shares/{drifted.pk}/edit/")
    drift = page.get_by_test_id("drift")
    expect(drift).to_contain_text("Changed in AWS")
    expect(drift).to_contain_text(f"{UNIT}: 2")
    expect(drift).to_contain_text(f"{UNIT}: 3")
    shot(page, "aws-drift-desktop")
    page.set_viewport_size({"width": 390, "height": 844})
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width}px wide on a 390px screen"
    shot(page, "aws-drift-phone")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Adopt AWS's value").click()
    expect(page.get_by_text("Adopted AWS's values for quota share QS1.")).to_be_visible()
    expect(page.get_by_test_id("drift")).to_have_count(0)
    drifted.refresh_from_db()
    assert limits_of(drifted) == {UNIT: 3}
