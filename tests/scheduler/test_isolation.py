"""scheduler/ is plain Python: importing it must not load Django, Celery or DRF."""

from __future__ import annotations

import subprocess
import sys


def test_importing_scheduler_loads_no_django(repo):
    code = (
        "import sys, scheduler, scheduler.scenarios, scheduler.bench, scheduler.simulate, "
        "scheduler.simulate.estimate, scheduler.simulate.loaders; "
        "loaded = [m for m in ('django', 'celery', 'rest_framework') if m in sys.modules]; "
        "print(','.join(loaded))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=repo, check=True
    )
    assert done.stdout.strip() == ""


def test_scheduler_sources_import_only_the_standard_library_and_itself(repo):
    stdlib = sys.stdlib_module_names
    offenders = []
    for path in (repo / "scheduler").rglob("*.py"):
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from"):
                top = words[1].split(".")[0]
                if top not in stdlib and top not in ("scheduler", "__future__"):
                    offenders.append(f"{path.name}: {line.strip()}")
    assert offenders == []
