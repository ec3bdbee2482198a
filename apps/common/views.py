"""Shared pieces of the browser pages."""

from __future__ import annotations

from django.contrib.auth.mixins import LoginRequiredMixin, UserPassesTestMixin
from django.http import QueryDict

from apps.common.roles import VIEWER, has_role


class ViewerRequiredMixin(LoginRequiredMixin, UserPassesTestMixin):
    """Pages need the viewer role or above: anonymous users go to the login page,
    logged-in users without a role get 403."""

    required_role = VIEWER

    def test_func(self) -> bool:
        return has_role(self.request.user, self.required_role)  # type: ignore[attr-defined]


def filter_data(query: QueryDict) -> QueryDict | None:
    """A filter form's query without its empty fields and the page number, or None when nothing
    is left. Browsers send every field of a GET form, and an empty ``state=`` must mean "any"
    rather than an invalid choice."""
    data = QueryDict(mutable=True)
    for key, values in query.lists():
        kept = [v for v in values if v.strip()]
        if kept and key != "page":
            data.setlist(key, kept)
    return data or None
