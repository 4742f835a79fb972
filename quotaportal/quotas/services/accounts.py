"""Admins manage people: teams and their members, user accounts, passwords and API tokens.

An admin never learns a password: a new account, or one whose password is reset, gets an
unusable password and the admin hands over an invite link (Django's password-reset token,
which stops working once used, when the password changes, or after PASSWORD_RESET_TIMEOUT)
where the user chooses their own. Every change is audited.
"""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from rest_framework.authtoken.models import Token

from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import ACTIVE, EventKind, Job, Membership, Team
from quotaportal.quotas.permissions import actor_name, require_admin
from quotaportal.quotas.services import tokens
from quotaportal.quotas.services.resources import team_name_error

USERNAME = re.compile(r"[\w.@+-]{1,150}", re.ASCII)


def _audit(actor, action: str, resource: str, name: str, **detail) -> None:
    record(actor, EventKind.RESOURCE_CHANGED, action=action, resource=resource, name=name, **detail)


@transaction.atomic
def rename_team(actor, team: Team, name: str) -> Team:
    require_admin(actor, "rename teams")
    if error := team_name_error(name):
        raise InvalidInput({"name": error})
    old = team.name
    if name == old:
        return team
    if Team.objects.filter(name=name).exclude(pk=team.pk).exists():
        raise InvalidInput({"name": f"a team named {name} already exists"})
    team.name = name
    team.save(update_fields=["name"])
    _audit(actor, "renamed", "team", name, previous=old)
    return team


@transaction.atomic
def delete_team(actor, team: Team) -> None:
    """Refused while the team owns quota shares: with active jobs those would be lost, and
    without them the shares still need an owner (move or delete them first)."""
    require_admin(actor, "delete teams")
    shares = list(team.quota_shares.select_related("job_queue").order_by("name"))
    if shares:
        active = Job.objects.filter(quota_share__in=shares, status__in=ACTIVE).count()
        names = ", ".join(str(s) for s in shares[:5]) + (" …" if len(shares) > 5 else "")
        if active:
            raise Conflict(
                f"team {team.name} owns shares with {active} active job(s) ({names}); "
                "let them finish or terminate them, then delete or move the shares"
            )
        raise Conflict(f"team {team.name} still owns quota shares ({names}); delete them first")
    name = team.name
    team.delete()
    _audit(actor, "deleted", "team", name)


@transaction.atomic
def set_member(actor, team: Team, user, *, is_admin: bool) -> Membership:
    """Add the user to the team, or change their role in it (also of a membership from the
    identity provider: the provider says who is in a team, not who administers it)."""
    require_admin(actor, "change team membership")
    membership, created = Membership.objects.update_or_create(
        team=team, user=user, defaults={"is_admin": bool(is_admin)}
    )
    role = "team admin" if is_admin else "member"
    _audit(
        actor,
        "added" if created else "changed role of",
        "member",
        user.username,
        team=team.name,
        role=role,
    )
    return membership


@transaction.atomic
def remove_member(actor, team: Team, user) -> None:
    require_admin(actor, "change team membership")
    if Membership.objects.filter(team=team, user=user, from_provider=True).exists():
        raise Conflict(
            f"{user.username} is in {team.name} through the identity provider's groups: remove "
            "them from the group there (the membership goes at their next sign-in)"
        )
    deleted, _ = Membership.objects.filter(team=team, user=user).delete()
    if not deleted:
        raise InvalidInput({"user": f"{user.username} is not a member of {team.name}"})
    _audit(actor, "removed", "member", user.username, team=team.name)


@transaction.atomic
def create_account(
    actor, *, username: str, email: str = "", admin: bool = False, teams=()
) -> tuple[object, str]:
    """A new user (no usable password until they follow their invite link) with an API
    token. Returns the user and the token key, shown once."""
    require_admin(actor, "create users")
    if not isinstance(username, str) or not USERNAME.fullmatch(username):
        raise InvalidInput({"username": "use 1 to 150 letters, digits and @ . + - _ (no spaces)"})
    User = get_user_model()
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, email=email or "", password=None)
    except IntegrityError:
        raise InvalidInput({"username": f"a user named {username} already exists"}) from None
    user.is_staff = user.is_superuser = bool(admin)
    user.save(update_fields=["is_staff", "is_superuser"])
    for team in teams:
        Membership.objects.get_or_create(team=team, user=user)
    _audit(actor, "created", "user", username, admin=bool(admin), teams=[t.name for t in teams])
    _, key = tokens.create_token(actor, user, name="first token (made with the account)")
    return user, key


@transaction.atomic
def set_active(actor, user, active: bool) -> None:
    """Deactivate (cannot sign in, token refused) or reactivate an account."""
    require_admin(actor, "deactivate users")
    if actor is not None and user.pk == actor.pk and not active:
        raise Conflict("you cannot deactivate your own account")
    user.is_active = bool(active)
    user.save(update_fields=["is_active"])
    _audit(actor, "reactivated" if active else "deactivated", "user", user.username)


@transaction.atomic
def set_email(actor, user, email: str) -> bool:
    """An admin sets (or clears, with "") the address a user's job e-mails go to. An account
    of the identity provider has it set again from the provider's claims at each sign-in.
    True once saved."""
    require_admin(actor, "change users' e-mail addresses")
    email = (email or "").strip() if isinstance(email, str) else email
    if not isinstance(email, str) or len(email) > 254:
        raise InvalidInput({"email": "give an e-mail address of at most 254 characters"})
    if email:
        try:
            validate_email(email)
        except ValidationError:
            shown = email if len(email) <= 60 else email[:60] + "…"
            raise InvalidInput(
                {"email": f"{shown!r} is not an e-mail address; for example ada@example.org"}
            ) from None
    before = user.email
    if email != before:
        user.email = email
        user.save(update_fields=["email"])
        _audit(actor, "changed the e-mail of", "user", user.username, previous=before, email=email)
    return True


@transaction.atomic
def reset_password(actor, user) -> None:
    """The old password stops working at once; the user sets a new one through a fresh
    invite link (earlier links die with the old password)."""
    require_admin(actor, "reset passwords")
    user.set_unusable_password()
    user.save(update_fields=["password"])
    _audit(actor, "reset the password of", "user", user.username)


@transaction.atomic
def new_api_token(actor, user) -> str:
    """A new full-access personal token for the user, made by an admin (shown once to them)."""
    require_admin(actor, "issue API tokens")
    name = f"made by {actor_name(actor)}"
    _, key = tokens.create_token(actor, user, name=name)
    return key


@transaction.atomic
def revoke_api_token(actor, user) -> None:
    """Every API token of the user stops working at once, personal and legacy."""
    require_admin(actor, "revoke API tokens")
    count = tokens.revoke_all(actor, user)
    _audit(actor, "revoked the API tokens of", "user", user.username, tokens=count)


@transaction.atomic
def revoke_own_legacy_token(user) -> None:
    """A person retires the plain-text token issued before personal tokens."""
    if Token.objects.filter(user=user).delete()[0]:
        _audit(user, "revoked the legacy API token of", "user", user.username)
