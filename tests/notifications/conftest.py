from __future__ import annotations

import pytest

from tests.notifications.listener import Listener

SECRET = "a-secret-of-twenty-chars"


@pytest.fixture
def listener():
    started = Listener(SECRET).start()
    yield started
    started.stop()


@pytest.fixture
def webhook(people, listener):
    from quotaportal.notifications import services

    return services.create_webhook(people.admin, name="ops", url=listener.url, secret=SECRET)
