"""Sign-ins, sign-outs and refused sign-ins go into the audit log."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed

from quotaportal.identity import audit


def connect() -> None:
    user_logged_in.connect(audit.signed_in, dispatch_uid="audit-signed-in")
    user_logged_out.connect(audit.signed_out, dispatch_uid="audit-signed-out")
    user_login_failed.connect(audit.password_refused, dispatch_uid="audit-sign-in-refused")
