"""The reference pages list what the code has: every setting, every AWS operation, every
picture taken by a browser test."""

from __future__ import annotations

import re

from quotaportal.awsbatch.endpoint.operations import OPERATIONS
from tests.docs.samples import REPO, doc_files

SETTINGS = REPO / "quotaportal" / "settings.py"


def test_the_settings_page_lists_every_setting_the_code_reads():
    read = set(re.findall(r'"((?:QP|DATABASE|REDIS)_[A-Z_]+)"', SETTINGS.read_text()))
    read |= set(re.findall(r'"(QP_[A-Z_]+)"', (REPO / "gunicorn.conf.py").read_text()))
    read.add("DATABASE_URL")  # dj_database_url.config() reads it
    listed = set(
        re.findall(r"^\| `([A-Z_]+)` \|", (REPO / "docs/operators/settings.md").read_text(), re.M)
    )
    assert read - listed == set(), "settings the docs do not list"
    assert listed - read == set(), "settings the docs list that the code does not read"


def test_the_aws_operations_page_lists_every_operation_the_endpoint_answers():
    page = (REPO / "docs/reference/aws-operations.md").read_text()
    table = page[page.index("| resource | operations |") : page.index("Requests are")]
    listed = {name.lower() for name in re.findall(r"[A-Z][A-Za-z]+", table) if name != "Requests"}
    listed &= {name.lower() for name in re.findall(r"\b[A-Z][a-z]+[A-Z][A-Za-z]+\b", table)}
    assert set(OPERATIONS) - listed == set()


def test_every_picture_in_the_docs_is_one_a_browser_test_takes():
    taken = set()
    for test in (REPO / "tests/web").glob("test_browser*.py"):
        taken |= set(re.findall(r'shot\(\w+, "([a-z0-9-]+)"\)', test.read_text()))
    for path in doc_files():
        for image in re.findall(r"images/([a-z0-9-]+)\.png", path.read_text()):
            assert image in taken, f"{path.name} shows {image}.png, which no browser test takes"
            assert (REPO / "docs/images" / f"{image}.png").is_file(), "run make screenshots"


def test_the_concepts_page_explains_every_pending_reason():
    from quotaportal.quotas.models import PendingReason

    page = (REPO / "docs/concepts.md").read_text()
    explained = set(re.findall(r"^\| `([A-Z_]+)` \|", page, re.M))
    assert explained == set(PendingReason.values)
