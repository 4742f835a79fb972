from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def scenarios_dir() -> Path:
    """shared/scenarios beside the checkout (as laid out for developers and CI)."""
    return Path(os.environ.get("QP_SCENARIOS_DIR", REPO.parent / "shared" / "scenarios"))


def scenario_files() -> list[Path]:
    files = sorted(scenarios_dir().glob("*.json"))
    if not files:
        # Never skip: a missing contract folder must turn the run red, not quietly green.
        raise RuntimeError(f"no scenario files found in {scenarios_dir()} (set QP_SCENARIOS_DIR)")
    return files


@pytest.fixture
def repo() -> Path:
    return REPO
