"""The what-if pages: draft, replay side by side, apply (audited) or discard; who may do what."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from django.utils.html import escape

from quotaportal.quotas import services
from quotaportal.quotas.models import Event, EventKind, QuotaShare, WhatIf
from quotaportal.quotas.services.shares import limits_of
from quotaportal.tick.run import run_tick
from quotaportal.web.numbers import duration
from quotaportal.web.whatif_explained import verdict
from quotaportal.whatif import runs as whatif
from scheduler.simulate.loaders import SAMPLE_TRACE_DIR
from tests.builders import submit


@pytest.fixture(autouse=True)
def _replays_in_process(settings):
    settings.QP_WHATIF_IN_PROCESS = True


@pytest.fixture
def history(people, fleet):
    """An hour of vision jobs that waited for each other: 6 one-GPU jobs of 10 minutes."""
    t0 = timezone.now() - timedelta(hours=1)
    for index in range(6):
        job = submit(people.alice, fleet, name=f"h{index}", now=t0 + timedelta(seconds=index))
        run_tick(fleet.queue.id, now=t0 + timedelta(seconds=index))
        services.mark_started(job, now=t0 + timedelta(seconds=index))
        services.end_attempt(
            job,
            succeeded=True,
            status_reason="ok",
            exit_code=0,
            now=t0 + timedelta(seconds=index + 600),
        )
    return fleet


@pytest.fixture
def post_draft(client, django_capture_on_commit_callbacks):
    """POST a draft; the replay queued on commit runs before this returns."""

    def post(fleet, **overrides):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(f"/what-if/queues/{fleet.queue.pk}/", _form(fleet, **overrides))

    return post


def _form(fleet, **overrides) -> dict:
    """The draft form as today's settings post it, with `overrides`."""
    data = {"capacity": "a100=4", "source": "history", "since_hours": "24", "new_name": ""}
    for index, share in enumerate(whatif.draft_of(fleet.queue)["shares"]):
        data[f"s{index}_limits"] = ", ".join(f"{u}={n}" for u, n in share["limits"].items())
        data[f"s{index}_strategy"] = share["strategy"]
        data[f"s{index}_state"] = share["state"]
        if share["in_share_preemption"]:
            data[f"s{index}_in_share"] = "on"
    data.update(overrides)
    return data


def test_an_admin_replays_a_draft_beside_today_and_applies_it(people, history, client, post_draft):
    client.force_login(people.admin)
    page = client.get(f"/what-if/queues/{history.queue.pk}/")
    assert page.status_code == 200
    assert b'data-share="vision"' in page.content
    # nlp (index 0 in name order) lends; the draft gives vision 4 and drops nlp to 1.
    response = post_draft(history, s0_limits="a100=1", s1_limits="a100=4")
    assert response.status_code == 302
    run = WhatIf.objects.get()
    assert run.status == "DONE"
    today, draft = run.result["today"], run.result["draft"]
    assert today["jobs"] == draft["jobs"] == 6
    assert draft["wait_p99_s"] <= today["wait_p99_s"]
    page = client.get(response["Location"]).content.decode()
    assert 'data-testid="chart-today"' in page
    assert 'data-testid="chart-draft"' in page
    assert "Apply the draft" in page
    # It says what the draft changes, and what that does, in words and units for people.
    assert "Share nlp: limits 2 a100 → 1 a100" in page
    assert "Share vision: limits 2 a100 → 4 a100" in page
    assert f'data-testid="verdict">{escape(verdict(today, draft))}<' in page
    assert f'<span class="num">{duration(today["makespan_s"])}</span>' in page
    assert f'<span class="num">{duration(today["capacity_bound_s"])}</span>' in page
    assert "• Share nlp: limits 2 a100 → 1 a100" in page, "the confirmation repeats the changes"

    assert client.post(f"/what-if/{run.pk}/apply/").status_code == 302
    assert limits_of(QuotaShare.objects.get(name="vision")) == {"a100": 4}
    assert limits_of(QuotaShare.objects.get(name="nlp")) == {"a100": 1}
    assert Event.objects.filter(kind=EventKind.SHARE_CHANGED, actor=people.admin).count() == 2
    run.refresh_from_db()
    assert run.status == "APPLIED"
    # Applied once: a second apply is refused with a message, nothing changes.
    client.post(f"/what-if/{run.pk}/apply/")
    assert Event.objects.filter(kind=EventKind.SHARE_CHANGED).count() == 2


def test_a_new_share_and_a_removed_one_replay_and_apply(people, history, client, post_draft):
    client.force_login(people.admin)
    response = post_draft(
        history,
        s0_remove="on",
        new_name="research",
        new_team="nlp",
        new_limits="a100=2",
        new_strategy="LEND_AND_BORROW",
        new_borrow_limit="50",
        new_state="ENABLED",
    )
    assert response.status_code == 302
    run = WhatIf.objects.get()
    assert set(run.result["draft"]["shares"]) == {"vision", "research"}
    services.update_share(people.admin, QuotaShare.objects.get(name="nlp"), state="ENABLED")
    client.post(f"/what-if/{run.pk}/apply/")
    assert set(QuotaShare.objects.values_list("name", flat=True)) == {"vision", "research"}
    research = QuotaShare.objects.get(name="research")
    assert (research.team.name, research.borrow_limit) == ("nlp", 50)


@pytest.mark.parametrize(
    ("overrides", "field_text"),
    [
        ({"s1_limits": "a100"}, "write unit=count pairs"),
        ({"s1_limits": "a100=0"}, "from 1 to"),
        ({"capacity": "a100=-1"}, "write unit=count pairs"),
        ({"new_name": "x", "new_limits": "a100=1", "new_strategy": "LEND"}, "needs a team"),
        ({"s0_strategy": "LEND", "s0_borrow_limit": "50"}, None),  # ignored unless borrowing
        ({"since_hours": "0"}, "greater than or equal to 1"),
    ],
)
def test_a_bad_draft_is_shown_again_with_what_to_fix(people, fleet, client, overrides, field_text):
    client.force_login(people.admin)
    response = client.post(f"/what-if/queues/{fleet.queue.pk}/", _form(fleet, **overrides))
    if field_text is None:
        assert response.status_code == 302
        return
    assert response.status_code == 400
    assert field_text in response.content.decode()
    assert not WhatIf.objects.exists()


def test_scientists_may_look_but_not_draft_apply_or_discard(people, history, client, post_draft):
    client.force_login(people.admin)
    post_draft(history)
    run = WhatIf.objects.get()
    client.force_login(people.alice)
    assert client.get("/what-if/").status_code == 200
    page = client.get(f"/what-if/{run.pk}/")
    assert page.status_code == 200
    assert b"Apply the draft" not in page.content
    assert client.get(f"/what-if/queues/{history.queue.pk}/").status_code == 403
    assert client.post(f"/what-if/queues/{history.queue.pk}/", _form(history)).status_code == 403
    assert client.post(f"/what-if/{run.pk}/apply/").status_code == 403
    assert client.post(f"/what-if/{run.pk}/discard/").status_code == 403
    run.refresh_from_db()
    assert run.status == "DONE"


def test_a_discarded_draft_cannot_be_applied(people, history, client, post_draft):
    client.force_login(people.admin)
    post_draft(history, s1_limits="a100=3")
    run = WhatIf.objects.get()
    assert client.post(f"/what-if/{run.pk}/discard/").status_code == 302
    client.post(f"/what-if/{run.pk}/apply/")
    assert limits_of(QuotaShare.objects.get(name="vision")) == {"a100": 2}


def test_a_running_replay_shows_its_progress_and_polls(people, fleet, client):
    run = WhatIf.objects.create(
        job_queue=fleet.queue,
        created_by=people.admin,
        draft=whatif.draft_of(fleet.queue),
        source="history",
        status="RUNNING",
        progress=0.4,
    )
    client.force_login(people.alice)
    page = client.get(f"/what-if/{run.pk}/").content.decode()
    assert 'value="40"' in page
    assert 'hx-trigger="every 1s"' in page


def test_the_trace_is_mapped_onto_the_queues_shares_and_sped_up():
    from scheduler import Share, Strategy
    from scheduler.simulate import QueueConfig, QueueWorkload, WorkJob, Workload

    config = QueueConfig(
        "gpu",
        {"a100": 4},
        (Share("nlp", {"a100": 2}, Strategy.LEND), Share("vision", {"a100": 2}, Strategy.LEND)),
    )
    trace_config = QueueConfig("openb", {"G2": 100}, (Share("be", {"G2": 1}, Strategy.LEND),))
    pods = (
        WorkJob("p1", "be", "G2", 8, 0, 1000.0, 500.0),
        WorkJob("p2", "ls", "G2", 1, 100, 1200.0, 100.0),
    )
    trace = Workload("openb", (QueueWorkload(trace_config, pods),))
    mapped = whatif.trace_onto(config, trace).queues[0].jobs
    assert [(j.share, j.unit, j.quantity) for j in mapped] == [
        ("nlp", "a100", 4),
        ("vision", "a100", 1),
    ]
    assert [(j.submit_s, j.duration_s) for j in mapped] == [(0.0, 5.0), (2.0, 1.0)]


def test_without_the_whole_trace_the_page_replays_the_sample_and_says_how_to_add_it(
    people, fleet, client, settings
):
    client.force_login(people.admin)
    settings.QP_TRACE_DIR = "/nonexistent/traces"
    page = client.get(f"/what-if/queues/{fleet.queue.pk}/").content.decode()
    assert 'value="trace"' in page, "the sample shipped with the code is always there"
    assert "the sample shipped with quotaportal" in page
    assert "download its two CSV files" in page
    assert "/nonexistent/traces" in page
    assert whatif.trace_folder() == SAMPLE_TRACE_DIR
    sample = Path(__file__).parents[2] / "scheduler/simulate/traces/alibaba-openb-sample"
    settings.QP_TRACE_DIR = str(sample)
    page = client.get(f"/what-if/queues/{fleet.queue.pk}/").content.decode()
    assert 'value="trace"' in page
    assert "download its two CSV files" not in page


def test_the_trace_folder_is_inside_the_checkout_by_default():
    checkout = Path(__file__).parents[2]
    env = {k: v for k, v in os.environ.items() if k != "QP_TRACE_DIR"}
    found = subprocess.run(
        [sys.executable, "-c", "from quotaportal import settings; print(settings.QP_TRACE_DIR)"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found).is_relative_to(checkout)
    assert Path(found).relative_to(checkout).parts[0] == "var"  # ignored by git
