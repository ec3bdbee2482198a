from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import requests
from authlib.common.errors import AuthlibBaseError
from django import forms
from django.conf import settings
from django.contrib.auth import login as auth_login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import View
from joserfc.errors import JoseError

from apps.accounts import oidc, services, sso

log = logging.getLogger(__name__)
BREAK_GLASS_SESSION_KEY = "break_glass"
NEXT_SESSION_KEY = "sso_next"
ID_TOKEN_SESSION_KEY = "sso_id_token"  # the hint the provider's end-session endpoint takes at logout


class BreakGlassAuthenticationForm(AuthenticationForm):
    """With single sign-on on, a password login is for the break-glass accounts only."""

    def confirm_login_allowed(self, user: Any) -> None:
        super().confirm_login_allowed(user)
        if oidc.enabled() and user.get_username() not in settings.BREAK_GLASS_USERS:
            raise forms.ValidationError("Password logins are for break-glass accounts only: sign in with SSO.",
                                        code="sso_only")


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True
    authentication_form = BreakGlassAuthenticationForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "sso_enabled": oidc.enabled()}

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        if oidc.enabled():  # only break-glass accounts get here: the login is audited and flagged
            services.break_glass_login_record(user=form.get_user())
            self.request.session[BREAK_GLASS_SESSION_KEY] = True
        return response


class LogoutView(auth_views.LogoutView):
    """Ends the local session, and the provider's where it offers an end-session endpoint."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get(ID_TOKEN_SESSION_KEY)
        response: HttpResponse = super().post(request, *args, **kwargs)
        if id_token and oidc.enabled():
            after = request.build_absolute_uri(str(settings.LOGOUT_REDIRECT_URL))
            end = oidc.end_session_url(id_token=str(id_token), after=after)
            if end:
                return HttpResponseRedirect(end)
        return response


def _sso_error(request: HttpRequest, *, status: int, title: str, message: str, audit: bool = True,
               who: str = "") -> HttpResponse:
    if audit:
        services.sso_failure_record(reason=f"{title}: {message}", who=who)
    return render(request, "accounts/sso_error.html", {"title": title, "message": message}, status=status)


class SsoLoginView(View):
    """Send the browser to the identity provider (authorization code flow, PKCE S256, state and nonce)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404("single sign-on is not configured")
        next_url = request.GET.get("next", "/")
        safe = url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()})
        request.session[NEXT_SESSION_KEY] = next_url if safe else "/"
        try:
            redirect: HttpResponse = oidc.client().authorize_redirect(
                request, request.build_absolute_uri(reverse("sso-callback")))
            return redirect
        except (requests.RequestException, AuthlibBaseError, ValueError) as exc:
            log.warning("single sign-on: the provider did not answer: %s", exc)
            return _sso_error(request, status=502, title="The identity provider did not answer",
                              message=f"{settings.OIDC_ISSUER} could not be reached ({type(exc).__name__}). "
                                      "Try again later; an admin can use a break-glass login meanwhile.")


class SsoCallbackView(View):
    """The provider's answer: the code exchanged for tokens, the ID token checked, the user created or
    updated from its claims, its role and scope re-read from its groups."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404("single sign-on is not configured")
        if request.GET.get("error"):
            return _sso_error(request, status=400, title="The identity provider refused the sign-in",
                              message=f"{request.GET.get('error')}: {request.GET.get('error_description', '')}")
        try:
            token = oidc.client().authorize_access_token(request)
        except requests.RequestException as exc:
            return _sso_error(request, status=502, title="The identity provider did not answer",
                              message=f"exchanging the code failed ({type(exc).__name__}); try again later")
        except (AuthlibBaseError, JoseError, ValueError) as exc:
            return _sso_error(request, status=400, title="The sign-in could not be verified",
                              message=_why(exc))
        claims = token.get("userinfo") or {}
        if not claims:
            return _sso_error(request, status=400, title="The sign-in could not be verified",
                              message="the provider sent no ID token")
        username = str(claims.get(settings.OIDC_USERNAME_CLAIM) or claims.get("sub"))[:150]
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
        groups = [str(g) for g in groups] if isinstance(groups, list) else [str(groups)]
        try:
            group_map = sso.parse_group_map(settings.OIDC_GROUP_MAP)
        except ValueError as exc:
            return _sso_error(request, status=500, title="Single sign-on is misconfigured", message=str(exc),
                              who=username)
        resolved = sso.resolve(groups, group_map)
        user, refusal = services.sso_login_record(
            issuer=str(claims["iss"]), subject=str(claims["sub"]), username=username,
            email=str(claims.get("email") or ""), groups=groups, role=resolved.role,
            scope_kind=resolved.scope_kind, scope_values=resolved.scope_values, refusal=resolved.refusal)
        if user is None:
            return _sso_error(request, status=403, title="Signed in, but no access here", message=refusal,
                              audit=False)
        next_url = request.session.pop(NEXT_SESSION_KEY, "/")
        auth_login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        request.session[ID_TOKEN_SESSION_KEY] = token.get("id_token", "")
        return HttpResponseRedirect(next_url)


def _why(exc: Exception) -> str:
    """A refusal in words: which check the sign-in failed."""
    name = type(exc).__name__
    text = str(getattr(exc, "description", "") or exc)
    if name == "MismatchingStateError" or "state" in text.lower():
        return ("the sign-in's state is unknown or was used already (a replayed or stale answer): "
                "start again from the login page")
    if name == "ExpiredTokenError":
        return "the ID token has expired"
    if name == "BadSignatureError":
        return "the ID token's signature does not match the provider's keys"
    if name == "InvalidClaimError":
        return f"the ID token failed a check: {text}"
    return f"{name}: {text}"[:300]


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
