from __future__ import annotations

from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "quotaportal.benchmarks"
    label = "benchmarks"
    verbose_name = "Benchmarks"
