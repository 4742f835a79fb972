"""The runnable samples of the docs: every fenced block marked `sh` or `python` in README.md
and docs/, unless the line before it says why it is not run (`<!-- not tested: REASON -->`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = {"sh", "python"}
FENCE = re.compile(r"^(?P<fence>`{3,})(?P<lang>[\w-]*)\s*$")
NOT_TESTED = re.compile(r"^<!-- not tested: (?P<why>\S.*?) -->$")


@dataclass(frozen=True)
class Sample:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    not_tested: str  # why it is not run; empty when it is

    @property
    def name(self) -> str:
        shown = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path
        return f"{shown}:{self.line}"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def samples_in(path: Path) -> list[Sample]:
    found: list[Sample] = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        close = opening["fence"]
        end = next(
            (i for i in range(index + 1, len(lines)) if lines[i].strip() == close), len(lines)
        )
        if opening["lang"] in RUN:
            before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
            skipped = NOT_TESTED.match(before.strip())
            found.append(
                Sample(
                    path,
                    index + 1,
                    opening["lang"],
                    "\n".join(lines[index + 1 : end]) + "\n",
                    skipped["why"] if skipped else "",
                )
            )
        index = end + 1
    return found


def all_samples() -> list[Sample]:
    return [sample for path in doc_files() for sample in samples_in(path)]
