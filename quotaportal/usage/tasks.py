"""Entry points: beat's roll-up task, and the embedded default's roll-up thread."""

from __future__ import annotations

import logging
import threading

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, connection

from quotaportal.usage import rollup

log = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def roll_up_usage() -> None:
    """Beat's task: the hourly usage rows of the hours that ended since the last one."""
    rollup.roll_up()


class RollupThread(threading.Thread):
    """The embedded default (no Celery): a roll-up every QP_USAGE_ROLLUP_SECONDS."""

    def __init__(self):
        super().__init__(name="quotaportal-usage", daemon=True)
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while True:
                close_old_connections()
                try:
                    rollup.roll_up()
                except Exception:  # reports count what is not rolled up live meanwhile
                    log.exception("usage roll-up failed")
                if self.stopped.wait(self.period()):
                    return
        finally:
            connection.close()

    @staticmethod
    def period() -> float:
        return float(settings.QP_USAGE_ROLLUP_SECONDS)

    def stop(self) -> None:
        self.stopped.set()
