"""The REST API over httpx: the token, the version check on every answer, errors as the server
words them, pages followed to the end, actions sent with an Idempotency-Key and retried with the
same key when the network failed (the server replays its first answer, so nothing runs twice)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from cpctl import API_MAJOR, __version__
from cpctl.errors import Refused, Unreachable

PAGE = 500  # rows per list request (the API allows up to 1,000)
RETRIES = 3  # attempts of an action whose answer was lost on the network
_HEX40 = re.compile(r"^[0-9a-f]{40}$")


class NetworkError(Unreachable):
    """No answer at all: the request may or may not have reached the server."""


def authorization(token: str) -> str:
    """The Authorization header for a token: as given when it names its scheme (``Token …``,
    ``Bearer …``); a user's API token (40 hex digits, ``manage.py drf_create_token``) as ``Token``;
    anything else as a service account's ``Bearer`` token."""
    token = token.strip()
    if token.startswith(("Token ", "Bearer ")):
        return token
    return f"Token {token}" if _HEX40.match(token) else f"Bearer {token}"


def check_version(response: httpx.Response, server: str) -> str:
    """The server's API version, or Unreachable when it is not one this cpctl speaks."""
    version = response.headers.get("X-API-Version")
    if version is None:
        raise Unreachable(f"{server} did not say which API version it speaks (no X-API-Version header on "
                          f"HTTP {response.status_code} from {response.request.url.path}): is it a control plane "
                          f"of API {API_MAJOR}.x? cpctl {__version__} speaks API {API_MAJOR}.x only")
    major = version.split(".", 1)[0]
    if major != str(API_MAJOR):
        raise Unreachable(f"{server} speaks API {version}; cpctl {__version__} speaks API {API_MAJOR}.x only: "
                          f"use a cpctl release for API {major}.x")
    return version


def refusal_text(response: httpx.Response) -> str:
    """The server's words: ``detail`` as sent, then each field's messages (400)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or f"HTTP {response.status_code}"
    if not isinstance(body, dict):
        return str(body)
    lines = [str(body.get("detail") or f"HTTP {response.status_code}")]
    for name, messages in (body.get("errors") or {}).items():
        for message in messages if isinstance(messages, list) else [messages]:
            if f"{name}: {message}" != lines[0]:
                lines.append(f"  {name}: {message}")
    return "\n".join(lines)


class Client:
    def __init__(self, server: str, token: str, *, timeout: float = 15.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.server = server.rstrip("/")
        self.api_version: str | None = None
        self.http = httpx.Client(base_url=self.server, timeout=timeout, transport=transport, headers={
            "Authorization": authorization(token), "Accept": "application/json",
            "User-Agent": f"cpctl/{__version__} (API {API_MAJOR})"})

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, method: str, path: str, *, params: Any = None, json: Any = None,
              headers: dict[str, str] | None = None) -> httpx.Response:
        try:
            response = self.http.request(method, path, params=params, json=json, headers=headers)
        except httpx.HTTPError as exc:
            raise NetworkError(f"{self.server}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500 and "X-API-Version" not in response.headers:
            raise Unreachable(f"{self.server} answered HTTP {response.status_code}: {response.text.strip()[:300]}")
        self.api_version = check_version(response, self.server)
        if response.status_code >= 500:
            raise Unreachable(f"{self.server} failed: HTTP {response.status_code}: {refusal_text(response)}")
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = None
            raise Refused(refusal_text(response), status=response.status_code, body=body)
        return response

    def get(self, path: str, params: Any = None) -> Any:
        return self._send("GET", path, params=params).json()

    def list(self, path: str, params: Any = None) -> Iterator[dict[str, Any]]:
        """Every row of a list, page after page (the server's ``next`` links, taken relative to the
        configured server so a proxy's idea of the host does not matter)."""
        query: Any = [*_pairs(params), ("limit", str(PAGE))]
        while True:
            page = self._send("GET", path, params=query).json()
            yield from page["results"]
            if not page.get("next"):
                return
            nxt = urlsplit(page["next"])
            path, query = nxt.path, httpx.QueryParams(nxt.query)

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        """PATCH is idempotent by itself: the same fields set again change nothing."""
        return self._send("PATCH", path, json=body).json()

    def act(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """POST an action with an Idempotency-Key; a lost answer is asked for again with the same
        key. Returns the status and the body."""
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        for attempt in range(1, RETRIES + 1):
            try:
                response = self._send("POST", path, json=body, headers=headers)
                return response.status_code, response.json()
            except NetworkError:
                if attempt == RETRIES:
                    raise
                time.sleep(0.5 * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def one(self, path: str, params: dict[str, Any], what: str) -> dict[str, Any]:
        """The single row a filter names, or Refused("no node named ...")."""
        page = self.get(path, {**params, "limit": 2})
        rows = page["results"]
        if len(rows) != 1:
            raise Refused(f"no {what}" if not rows else f"{len(rows)} rows match {what}", status=404)
        return dict(rows[0])


def _pairs(params: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in (params or {}).items():
        for v in value if isinstance(value, list | tuple) else [value]:
            if v is not None:
                out.append((key, str(v).lower() if isinstance(v, bool) else str(v)))
    return out
