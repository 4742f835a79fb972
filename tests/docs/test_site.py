"""The documentation site is self-contained: built as `make docs` builds it, no page loads a
font, style sheet, script or image from another host (offline, each such load was an error
in the browser's console)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.docs.samples import REPO

# What a browser fetches by itself: style sheets, preconnects, scripts, images, frames.
LOADS = re.compile(
    r"<(?:link|script|img|iframe|source)\b[^>]*\b(?:href|src)=\"(?P<url>(?:https?:)?//[^\"]+)\"",
    re.I,
)


def test_no_page_loads_anything_from_another_host(tmp_path: Path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
        capture_output=True,
    )
    pages = sorted((tmp_path / "site").rglob("*.html"))
    assert len(pages) > 10
    outside = {
        f"{page.relative_to(tmp_path)}: {match['url']}"
        for page in pages
        for match in LOADS.finditer(page.read_text())
    }
    assert outside == set()


MARKDOWN_NAME = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b")


def test_the_docs_cite_only_files_the_repository_holds():
    """A page naming `DESIGN.md` or a guide that does not exist sends readers nowhere."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    texts = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    missing = set()
    for text in texts:
        for name in MARKDOWN_NAME.findall(text.read_text()):
            if not any(f"/{path}".endswith(f"/{name.lstrip('./')}") for path in tracked):
                missing.add(f"{text.relative_to(REPO)}: {name}")
    assert missing == set()


WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def test_the_first_tour_tells_what_the_demo_lets_qs1_borrow(db):
    """Getting started says how far QS1 reaches in the demo: what the demo really seeds."""
    from io import StringIO

    from django.core.management import call_command

    from quotaportal.quotas.models import QuotaShare

    call_command("seed_demo", "--backend", "LOCAL", "--capacity", "3", stdout=StringIO())
    qs1 = QuotaShare.objects.get(name="QS1")
    limit = qs1.capacity_limits.get().max_capacity
    borrowable = limit * qs1.borrow_limit // 100
    tour = " ".join((REPO / "docs" / "getting-started.md").read_text().split())
    assert f"QS1 may use up to {WORDS[limit + borrowable]} GPUs" in tour
    assert f"its borrow limit of {qs1.borrow_limit} % allows {WORDS[borrowable]}" in tour
