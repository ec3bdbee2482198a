"""``Idempotency-Key`` for API actions (as Stripe and the IETF draft describe it).

The first request with a key runs inside one transaction with the insert of the
key's row and stores its reply; a replay by the same user gets the stored reply
(header ``Idempotent-Replayed: true``). Two requests with one key at once: the
second waits on the row's unique index until the first commits, then replays
it. The key reused for another request (method, path or body) is 422. A failing
request (4xx) stores nothing, so the client may fix it and retry with the key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import NotAuthenticated, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from apps.operations.models import IdempotencyRecord

HEADER = "Idempotency-Key"
_KEY = re.compile(r"^[\x21-\x7e]{1,128}$")
# The header as the schema states it: the same pattern, so a client knows which keys are refused.
PARAMETER = OpenApiParameter(
    HEADER, {"type": "string", "pattern": "^[!-~]{1,128}$", "minLength": 1, "maxLength": 128},
    OpenApiParameter.HEADER, required=False,
    description="1 to 128 printable ASCII characters, no spaces. Replays of the same key (same user, same "
                "request) return the first reply; the key with another request is 422.")


def _hash(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def _replay(rec: IdempotencyRecord, *, method: str, path: str, digest: str) -> Response:
    if (rec.method, rec.path, rec.request_hash) != (method, path, digest):
        return Response({"detail": f"{HEADER} {rec.key!r} was used for another request ({rec.method} {rec.path} "
                                   "with another body); use a new key"},
                        status=status.HTTP_422_UNPROCESSABLE_ENTITY)
    return Response(rec.response, status=rec.status_code, headers={"Idempotent-Replayed": "true"})


class _Failed(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def idempotent(request: Request, run: Callable[[], Response]) -> Response:
    key = request.headers.get(HEADER)
    if key is None:
        return run()
    if not _KEY.match(key):
        raise ValidationError({HEADER: ["1 to 128 printable ASCII characters"]})
    method, path, digest = request.method or "", request.path, _hash(request)
    user = request.user
    if not isinstance(user, User):
        raise NotAuthenticated(f"{HEADER} needs an authenticated user")
    stored = IdempotencyRecord.objects.filter(user=user, key=key).first()
    if stored is not None:
        return _replay(stored, method=method, path=path, digest=digest)
    try:
        with transaction.atomic():
            try:
                with transaction.atomic():
                    rec = IdempotencyRecord.objects.create(user=user, key=key, method=method, path=path,
                                                           request_hash=digest, status_code=0, response={})
            except IntegrityError:
                rec = None
            if rec is not None:
                response = run()
                if response.status_code >= 400:
                    raise _Failed(response)
                rec.status_code, rec.response = response.status_code, response.data
                rec.save(update_fields=["status_code", "response"])
                response["Idempotent-Replayed"] = "false"
                return response
    except _Failed as failed:
        return failed.response
    stored = IdempotencyRecord.objects.get(user=user, key=key)
    return _replay(stored, method=method, path=path, digest=digest)
