"""The Slurm settings page in a browser: saved by keyboard, a bad value shown beside its field,
and readable at phone width."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.quotas import services
from quotaportal.slurm.models import SlurmCluster
from tests.web.builders import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hpc(people):
    from tests.web.builders import PASSWORD

    people.admin.set_password(PASSWORD)
    people.admin.save()
    services.create_capacity_unit(people.admin, name="a100")
    return services.create_service_environment(
        people.admin, name="hpc", backend="SLURM", capacity_limits={"a100": 8}
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_an_admin_sets_up_slurm_by_keyboard(browser, live_server, hpc, width):
    page = sign_in(browser, live_server, "ada", width=width)
    page.goto(f"{live_server.url}/manage/environments/{hpc.pk}/")
    page.get_by_role("link", name="Slurm settings").click()
    page.get_by_label("Working folder").fill("not/absolute")
    page.get_by_label("Pending limit (s)").fill("120")
    page.get_by_label("Working folder").press("Enter")
    expect(page.get_by_role("alert").first).to_contain_text("absolute path")
    page.get_by_label("Working folder").fill("/scratch/quotaportal")
    page.get_by_label("Run jobs as").fill("{username}")
    page.get_by_label("Working folder").press("Enter")
    expect(page.get_by_text("Saved the Slurm settings")).to_be_visible()
    page.get_by_label("Partition").fill("gpu")
    page.get_by_label("GPU type").fill("a100")
    page.get_by_label("GPU type").press("Enter")
    expect(page.get_by_text("Saved the Slurm settings")).to_be_visible()
    cluster = SlurmCluster.objects.get(environment=hpc)
    assert (cluster.work_dir, cluster.run_as) == ("/scratch/quotaportal", "{username}")
    assert cluster.units.get().partition == "gpu"
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    shot(page, f"slurm-settings-{width}")
