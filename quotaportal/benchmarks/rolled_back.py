"""What every benchmark command shares: measure inside a transaction that is rolled back (the
database is left as it was), and the median of repeated timings."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from django.db import transaction


class _Rollback(Exception):
    pass


def rolled_back(measure: Callable[[], dict]) -> dict:
    """measure()'s figures; everything it wrote is rolled back."""
    figures: dict = {}
    try:
        with transaction.atomic():
            figures = measure()
            raise _Rollback
    except _Rollback:
        pass
    return figures


def median_ms(fn: Callable[[], object], repeat: int, setup: Callable[[], object] = lambda: None):
    timings = []
    for _ in range(repeat):
        setup()
        began = time.perf_counter()
        fn()
        timings.append((time.perf_counter() - began) * 1000)
    return statistics.median(timings)
