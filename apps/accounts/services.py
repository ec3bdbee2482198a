"""Users and roles."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.db import transaction

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
