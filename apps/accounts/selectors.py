from typing import Any

from apps.accounts.choices import ScopeKind
from apps.accounts.models import AccessScope, SavedView, ServiceAccount
from apps.common.roles import role_of


def scope_of(*, user: Any) -> dict[str, Any]:
    """``{"kind": ..., "values": [...]}``: where ``user`` may act (no row: the whole fleet)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return {"kind": ScopeKind.FLEET, "values": []}
    cached = getattr(user, "_cp_scope", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    row = AccessScope.objects.filter(user_id=user.pk).values("kind", "values").first()
    scope = {"kind": row["kind"], "values": list(row["values"])} if row else {"kind": ScopeKind.FLEET, "values": []}
    user._cp_scope = scope
    return scope


def scope_text(scope: dict[str, Any]) -> str:
    """A scope as a refusal names it: ``the whole fleet``, ``tiers hybrid_inference``, ``racks r01, r02``."""
    if scope["kind"] == ScopeKind.FLEET:
        return "the whole fleet"
    return f"{scope['kind']} {', '.join(scope['values'])}"


def scope_limit_text(*, user: Any) -> str:
    """The user's scope as a page names it (``tiers hybrid_inference``), or "" when it is the whole fleet."""
    scope = scope_of(user=user)
    return "" if scope["kind"] == ScopeKind.FLEET else scope_text(scope)


def user_profile(*, user: Any) -> dict[str, Any]:
    return {"username": user.get_username(), "role": role_of(user),
            "service_account": ServiceAccount.objects.filter(user_id=user.pk).exists(),
            "scope": scope_of(user=user)}


def saved_view_query(*, user: Any, page: str) -> str | None:
    """The query string ``user`` saved as ``page``'s default view, or None."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return SavedView.objects.filter(user_id=user.pk, page=page).values_list("query", flat=True).first()
