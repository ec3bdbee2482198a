"""Login throttling (django-axes): failed logins are counted per username and per client
address; past the limit both are locked for a cool-off (docs/security.md, "Login throttling")."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LoginThrottleBackend(AxesStandaloneBackend):
    """Refuses a login from a locked username or address, before the password is checked.
    A login without a request (in-process: management commands, the test client's ``login()``)
    comes from no address and is not a network attempt: it is not throttled."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None,  # type: ignore[override]
                     password: str | None = None, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)  # type: ignore[no-any-return]
