from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    pass


def locked_out(request: HttpRequest, original_response: HttpResponse | None = None,
               credentials: dict[str, Any] | None = None) -> HttpResponse:
    """The answer to a login from a locked username or address (django-axes): the login page,
    429, saying why, for how long and how to get in sooner; ``Retry-After`` in seconds."""
    cool_off = settings.AXES_COOLOFF_TIME
    seconds = int(cool_off.total_seconds()) if isinstance(cool_off, dt.timedelta) else 0
    minutes = max(1, round(seconds / 60))
    message = (f"Too many failed logins for this username or from this address "
               f"({settings.AXES_FAILURE_LIMIT} in a row): logins are refused for {minutes} minutes. "
               "An admin can release the lock sooner (Admin → Access attempts).")
    response = render(request, "accounts/login.html", {"locked_out": message, "form": None}, status=429)
    if seconds:
        response["Retry-After"] = str(seconds)
    return response
