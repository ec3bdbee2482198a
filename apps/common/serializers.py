"""The one error shape of the API, for the schema (``apps.common.errors`` writes it)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer[Any]):
    """Every error answer: ``detail`` in words, ``errors`` by field path for bad input. Some answers
    add members beside ``detail`` (a conflict's numbers); a client may ignore those it does not know."""

    detail = serializers.CharField(help_text="What went wrong, in words")
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()), required=False,
        help_text="Bad input: messages by field path, e.g. `items[3].slot` (400; and 404 for "
                  "objects a request body names that do not exist)")
