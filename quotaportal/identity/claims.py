"""From an identity provider's claims to an account here: the username, the teams and the
admin role, re-applied at every sign-in by the rules in settings (QP_OIDC_*).

- Each group matching QP_OIDC_TEAM_PATTERN makes its holder a member of the team the pattern's
  `team` group names (the whole group name without one); a team missing here is created.
- Holding QP_OIDC_ADMIN_GROUP makes a platform admin, and losing it takes the role back (when
  no admin group is set, the role is left as an admin set it here).
- Memberships from claims are marked so; a group gone at the next sign-in removes its
  membership. Memberships an admin made here are never touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from quotaportal.identity.models import ProviderAccount
from quotaportal.quotas.audit import record
from quotaportal.quotas.models import EventKind, Membership, Team
from quotaportal.quotas.services.accounts import USERNAME
from quotaportal.quotas.services.resources import team_name_error

MAX_GROUPS = 1000  # a claim holding more is cut here, not trusted to be small


@dataclass(frozen=True)
class Rules:
    groups_claim: str
    team_pattern: re.Pattern | None
    admin_group: str

    @classmethod
    def from_settings(cls) -> Rules:
        pattern = settings.QP_OIDC_TEAM_PATTERN
        return cls(
            groups_claim=settings.QP_OIDC_GROUPS_CLAIM,
            team_pattern=re.compile(pattern) if pattern else None,
            admin_group=settings.QP_OIDC_ADMIN_GROUP,
        )

    def groups(self, claims: dict) -> list[str]:
        """The claim as a list of names: providers send a list, some a single string."""
        value = claims.get(self.groups_claim) or []
        if isinstance(value, str):
            value = value.replace(",", " ").split()
        if not isinstance(value, list):
            return []
        return sorted({g for g in value[:MAX_GROUPS] if isinstance(g, str) and g})

    def team_names(self, groups: list[str]) -> dict[str, str]:
        """Team name → the group it comes from, for the groups the pattern takes whose team
        name is one a team may have."""
        found = {}
        if self.team_pattern is None:
            return found
        for group in groups:
            match = self.team_pattern.fullmatch(group)
            if not match:
                continue
            name = match.groupdict().get("team") or match.group(0)
            if team_name_error(name) is None:
                found.setdefault(name, group)
        return found

    def is_admin(self, groups: list[str]) -> bool | None:
        return (self.admin_group in groups) if self.admin_group else None


def username_from(claims: dict) -> str:
    """A username as this portal allows them: the configured claim, else the e-mail's local
    part, else the subject; characters it cannot hold become '-'."""
    wanted = claims.get(settings.QP_OIDC_USERNAME_CLAIM) or ""
    if not isinstance(wanted, str) or not wanted:
        email = claims.get("email")
        wanted = email.split("@")[0] if isinstance(email, str) and email else str(claims["sub"])
    cleaned = re.sub(r"[^\w.@+-]", "-", wanted, flags=re.ASCII)[:150]
    return cleaned if USERNAME.fullmatch(cleaned) else "user-" + str(claims["sub"])[:140]


@transaction.atomic
def apply(user, claims: dict, issuer: str, rules: Rules | None = None) -> list[str]:
    """Bring the user's provider memberships, admin role and e-mail in line with the claims;
    what changed, in words (each also in the audit log)."""
    rules = rules or Rules.from_settings()
    groups = rules.groups(claims)
    ProviderAccount.objects.update_or_create(
        user=user, defaults={"issuer": issuer, "subject": str(claims["sub"]), "groups": groups}
    )
    changes = _apply_teams(user, rules.team_names(groups))
    changes += _apply_profile(user, claims, rules.is_admin(groups))
    return changes


def _apply_teams(user, wanted: dict[str, str]) -> list[str]:
    changes = []
    held = {m.team.name: m for m in Membership.objects.filter(user=user).select_related("team")}
    for name, group in sorted(wanted.items()):
        if name in held:
            continue  # already a member: from the provider, or made here by an admin
        team, created = Team.objects.get_or_create(name=name)
        if created:
            _audit(user, "created", "team", name, group=group)
        Membership.objects.create(team=team, user=user, from_provider=True)
        _audit(user, "added", "member", user.get_username(), team=name, group=group)
        changes.append(f"joined {name}")
    for name, membership in sorted(held.items()):
        if membership.from_provider and name not in wanted:
            membership.delete()
            _audit(user, "removed", "member", user.get_username(), team=name)
            changes.append(f"left {name}")
    return changes


def _apply_profile(user, claims: dict, admin: bool | None) -> list[str]:
    changes, fields = [], []
    email = claims.get("email")
    if isinstance(email, str) and email and email != user.email and len(email) <= 254:
        user.email = email
        fields.append("email")
    if admin is not None and admin != (user.is_staff and user.is_superuser):
        user.is_staff = user.is_superuser = admin
        fields += ["is_staff", "is_superuser"]
        action = "granted admin to" if admin else "took admin from"
        _audit(user, action, "user", user.get_username())
        changes.append("became an admin" if admin else "is no longer an admin")
    if fields:
        user.save(update_fields=fields)
    return changes


def _audit(user, action: str, resource: str, name: str, **detail) -> None:
    record(
        user,
        EventKind.RESOURCE_CHANGED,
        action=action,
        resource=resource,
        name=name,
        source="identity provider",
        **detail,
    )
