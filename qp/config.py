"""Where qp keeps the portal's URL and the user's token: a JSON file only its owner can read
($QP_CONFIG, else $XDG_CONFIG_HOME/quotaportal/qp.json, else ~/.config/quotaportal/qp.json).
QP_URL and QP_TOKEN in the environment win over it (for CI jobs and scripts)."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path


def path() -> Path:
    if explicit := os.environ.get("QP_CONFIG"):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "quotaportal" / "qp.json"


@dataclass(frozen=True)
class Settings:
    url: str = ""
    token: str = ""


def load() -> Settings:
    try:
        saved = json.loads(path().read_text())
    except (OSError, ValueError):
        saved = {}
    saved = saved if isinstance(saved, dict) else {}
    return Settings(
        url=os.environ.get("QP_URL") or str(saved.get("url") or ""),
        token=os.environ.get("QP_TOKEN") or str(saved.get("token") or ""),
    )


def save(url: str, token: str) -> Path:
    """Write the file with mode 0600 from its creation on (never readable by others, not
    even for an instant), replacing an older one whole."""
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = target.with_suffix(".tmp")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump({"url": url, "token": token}, file)
    os.replace(temporary, target)
    os.chmod(target, 0o600)
    return target
