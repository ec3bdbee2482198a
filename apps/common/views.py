"""Shared pieces of the browser pages."""

from __future__ import annotations

from django.contrib.auth.mixins import LoginRequiredMixin, UserPassesTestMixin

from apps.common.roles import VIEWER, has_role


class ViewerRequiredMixin(LoginRequiredMixin, UserPassesTestMixin):
    """Pages need the viewer role or above: anonymous users go to the login page,
    logged-in users without a role get 403."""

    required_role = VIEWER

    def test_func(self) -> bool:
        return has_role(self.request.user, self.required_role)  # type: ignore[attr-defined]
