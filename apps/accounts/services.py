"""Users, roles, scopes and service accounts."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from apps.accounts.choices import ListPage, ScopeKind
from apps.accounts.models import AccessScope, ExternalIdentity, SavedView, ServiceAccount, ServiceToken
from apps.audit.choices import Source
from apps.audit.services import actor_name, audit_record
from apps.common.errors import Conflict
from apps.common.keys import new_key
from apps.common.roles import ADMIN, ROLES


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
def saved_view_save(*, user: User, page: str, query: str) -> SavedView:
    """Keep ``query`` (a list page's filters and sort, already validated by the page) as the view
    ``page`` opens with for ``user``, replacing the one kept before. Not audited: it changes what
    one user sees first, nothing in the fleet."""
    if page not in ListPage.values:
        raise ValueError(f"unknown list page {page!r}")
    query = query.strip().lstrip("?")
    if not query:
        raise ValueError("an empty view is the page's own default: clear the saved view instead")
    if len(query) > SavedView._meta.get_field("query").max_length:  # type: ignore[operator]
        raise ValueError("this view is too long to save")
    saved, _ = SavedView.objects.update_or_create(user=user, page=page, defaults={"query": query})
    return saved


@transaction.atomic
def saved_view_clear(*, user: User, page: str) -> bool:
    """Forget ``user``'s saved view of ``page``; True when there was one."""
    deleted, _ = SavedView.objects.filter(user=user, page=page).delete()
    return deleted > 0


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


@transaction.atomic
def sso_login_record(*, issuer: str, subject: str, username: str, email: str, groups: list[str],
                     role: str | None, scope_kind: str, scope_values: list[str],
                     refusal: str = "") -> tuple[User | None, str]:
    """Create or update the user of (issuer, subject) from a sign-in's claims; its role and scope are
    what its groups map to now (re-read at every sign-in). Returns the user, or None and why the sign-in
    is refused: no mapped group (a known user loses its roles; no user is created), or a name taken by
    a local account or a service account. Either way one audit record says what happened."""
    identity = ExternalIdentity.objects.select_for_update().select_related("user").filter(
        issuer=issuer, subject=subject).first()
    if identity is None:
        if User.objects.filter(username=username).exists():
            refusal = f"a local account is named {username}: an admin must rename one of them"
        if refusal:
            audit_record(actor="sso", action="login.sso_refused", target_type="login", target_repr=username,
                         source=Source.BROWSER, reason=refusal, changes={"groups": [None, groups]})
            return None, refusal
        user = User(username=username)
        user.set_unusable_password()
        user.save()
        identity = ExternalIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    user = identity.user
    identity.groups, identity.last_login_at = groups, timezone.now()
    identity.save(update_fields=["groups", "last_login_at"])
    scope_before = AccessScope.objects.filter(user=user).first()
    before = {"role": role_of_groups(user), "scope": str(scope_before) if scope_before else ScopeKind.FLEET}
    user.groups.remove(*[g for g in user.groups.all() if g.name in ROLES])
    if not refusal and role is not None:
        user.groups.add(roles_ensure()[role])
    user.email = email or user.email
    user.is_staff = user.is_superuser = role == ADMIN and not refusal
    user.save()
    scope = scope_set(user=user, kind=ScopeKind.FLEET if refusal else scope_kind,
                      values=[] if refusal else scope_values)
    after = {"role": None if refusal else role, "scope": str(scope) if scope else ScopeKind.FLEET}
    changes: dict[str, Any] = {k: [before[k], after[k]] for k in before if before[k] != after[k]}
    changes["groups"] = [None, groups]
    if refusal:
        audit_record(actor="sso", action="login.sso_refused", target=user, source=Source.BROWSER, reason=refusal,
                     changes=changes)
        return None, refusal
    audit_record(actor=user, action="login.sso", target=user, source=Source.BROWSER, changes=changes)
    return user, ""


def role_of_groups(user: User) -> str | None:
    names = set(user.groups.values_list("name", flat=True))
    return next((r for r in reversed(ROLES) if r in names), None)


@transaction.atomic
def sso_failure_record(*, reason: str, who: str = "") -> None:
    """An audit record of a refused sign-in (bad token, bad state, provider away): nothing else is written."""
    audit_record(actor="sso", action="login.sso_failed", target_type="login", target_repr=who, reason=reason,
                 source=Source.BROWSER)


@transaction.atomic
def break_glass_login_record(*, user: User) -> None:
    audit_record(actor=user, action="login.break_glass", target=user, source=Source.BROWSER,
                 reason="local password login while single sign-on is configured")
