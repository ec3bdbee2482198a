"""Who may act where (scopes), and the accounts automation acts as (service accounts, their tokens).

A scope names tiers by kind and racks by name, as plain values: accounts sits below the inventory,
so the check of a node against a scope lives with the inventory (``apps/inventory/scopes.py``)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.accounts.choices import ListPage, ScopeKind


class AccessScope(models.Model):
    """The scope of a user's actions. No row: the whole fleet."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True,
                                related_name="access_scope")
    kind = models.CharField(max_length=8, choices=ScopeKind.choices, default=ScopeKind.FLEET)
    values = ArrayField(models.CharField(max_length=64), default=list, blank=True,
                        help_text="Tier kinds (tiers) or rack names (racks); empty for the whole fleet")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(kind=ScopeKind.FLEET, values__len=0) | (~Q(kind=ScopeKind.FLEET) & Q(values__len__gt=0)),
                name="access_scope_values_iff_not_fleet",
            )
        ]

    def __str__(self) -> str:
        return self.kind if self.kind == ScopeKind.FLEET else f"{self.kind} {', '.join(self.values)}"


class ServiceAccount(models.Model):
    """A user automation acts as: no password, cannot log in, owned by an admin. Its role is its group,
    its scope an AccessScope, like a person's, so permissions and the audit trail treat it the same."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="service_account")
    name = models.CharField(max_length=150, unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                              related_name="owned_service_accounts")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ServiceToken(models.Model):
    """A bearer token of a service account (``Authorization: Bearer <token>``). Only the SHA-256 of the
    token is stored; the token is shown once, when issued."""

    account = models.ForeignKey(ServiceAccount, on_delete=models.CASCADE, related_name="tokens")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_prefix = models.CharField(max_length=8, editable=False, help_text="First characters, to tell tokens apart")
    note = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from this time on; none: never")
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="Written at most once a minute")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.account.name} token {self.pk} ({self.key_prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())


class ExternalIdentity(models.Model):
    """The identity provider's subject a user signs in as. A user is found by (issuer, subject), never by
    username alone: a provider's account named like a local one (a break-glass admin) is not it."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = ArrayField(models.CharField(max_length=255), default=list, blank=True,
                        help_text="The groups of the last login, as the provider sent them")
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="external_identity_unique")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class SavedView(models.Model):
    """A user's default view of a list page: the filters and sort it opens with when its address
    has no query. A display preference of the user's own, not a change to the fleet: not audited."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    page = models.CharField(max_length=16, choices=ListPage.choices)
    query = models.CharField(max_length=2000, help_text="The page's query string (filters and sort), validated")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "page"], name="saved_view_one_per_user_page")]

    def __str__(self) -> str:
        return f"{self.user} {self.page}: {self.query}"
