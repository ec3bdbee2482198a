"""Request parsers of the API (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import BaseParser

from apps.common.jsonbody import BadJSON, load_json


class JSONParser(BaseParser):
    """JSON bodies read by ``apps.common.jsonbody.load_json``: the same decoder and the same
    rules as the telemetry ingest (duplicated keys: the last wins; NaN, Infinity, numbers out
    of range, invalid UTF-8 and runaway nesting: a 400 naming the problem)."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        body = stream.read() if stream is not None else b""
        try:
            return load_json(body)
        except BadJSON as exc:
            if exc.path:  # a value of the body: that field's error, as a serializer would say it
                raise ValidationError({exc.path: [exc.message]}) from None
            raise ParseError(str(exc)) from None
