from __future__ import annotations

from django.apps import AppConfig


class IdentityConfig(AppConfig):
    name = "quotaportal.identity"
    label = "identity"
    verbose_name = "Identity: sign-in and personal API tokens"

    def ready(self) -> None:
        from quotaportal.identity import signals

        signals.connect()
