"""Users, roles, scopes and service accounts."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from apps.accounts.choices import ScopeKind
from apps.accounts.models import AccessScope, ServiceAccount, ServiceToken
from apps.audit.services import actor_name, audit_record
from apps.common.errors import Conflict
from apps.common.keys import new_key
from apps.common.roles import ROLES


@transaction.atomic
def roles_ensure() -> dict[str, Group]:
    return {name: Group.objects.get_or_create(name=name)[0] for name in ROLES}


@transaction.atomic
def user_ensure(*, username: str, password: str, role: str) -> tuple[User, bool]:
    """Create ``username`` with ``role`` if absent; an existing user keeps its password."""
    groups = roles_ensure()
    user, created = User.objects.get_or_create(username=username)
    if created:
        user.set_password(password)
        user.is_staff = role == "admin"
        user.is_superuser = role == "admin"
        user.save()
    user.groups.add(groups[role])
    return user, created


@transaction.atomic
def scope_set(*, user: User, kind: str, values: list[str]) -> AccessScope | None:
    """Set where ``user`` may act. The whole fleet is no row."""
    if kind not in ScopeKind.values:
        raise ValueError(f"unknown scope kind {kind!r}")
    values = sorted(set(values))
    if (kind == ScopeKind.FLEET) != (not values):
        raise ValueError("the whole fleet names no tiers or racks; a tier or rack scope names at least one")
    if kind == ScopeKind.FLEET:
        AccessScope.objects.filter(user=user).delete()
        return None
    scope, _ = AccessScope.objects.update_or_create(user=user, defaults={"kind": kind, "values": values})
    return scope


@transaction.atomic
def service_account_create(*, name: str, role: str, owner: User, scope_kind: str = ScopeKind.FLEET,
                           scope_values: list[str] | None = None, actor: Any) -> ServiceAccount:
    """A user automation acts as: no usable password (it cannot log in), the role's group, the scope."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    if User.objects.filter(username=name).exists():
        raise Conflict(f"a user named {name} exists already")
    user = User(username=name, is_active=True, is_staff=False, is_superuser=False)
    user.set_unusable_password()
    user.save()
    user.groups.add(roles_ensure()[role])
    account = ServiceAccount.objects.create(user=user, name=name, owner=owner)
    scope = scope_set(user=user, kind=scope_kind, values=scope_values or [])
    audit_record(actor=actor, action="service_account.create", target=account,
                 changes={"role": [None, role], "owner": [None, owner.get_username()],
                          "scope": [None, str(scope) if scope else ScopeKind.FLEET]})
    return account


@transaction.atomic
def service_token_issue(*, account: ServiceAccount, actor: Any, expires_at: dt.datetime | None = None,
                        note: str = "") -> tuple[ServiceToken, str]:
    """A new token of ``account``; the token itself is returned once and never stored."""
    if expires_at is not None and expires_at <= timezone.now():
        raise ValueError("expires_at must be in the future")
    key, key_hash, prefix = new_key()
    token = ServiceToken.objects.create(account=account, key_hash=key_hash, key_prefix=prefix, note=note,
                                        expires_at=expires_at, created_by=actor_name(actor))
    audit_record(actor=actor, action="service_token.issue", target=token, related=account,
                 changes={"expires_at": [None, expires_at.isoformat() if expires_at else None]})
    return token, key


@transaction.atomic
def service_token_revoke(*, token: ServiceToken, actor: Any) -> ServiceToken:
    """Refuse ``token`` from now on (compare-and-set: revoking twice records once)."""
    updated = ServiceToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()
    if updated:
        audit_record(actor=actor, action="service_token.revoke", target=token, related=token.account)
    return token
