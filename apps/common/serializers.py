"""The one error shape of the API, for the schema (``apps.common.errors`` writes it), and a reference
by natural key that never reaches the database with text it cannot hold."""

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


def storable(text: str) -> bool:
    """Whether PostgreSQL can hold (and so compare) this text: no NUL character, no lone surrogate."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class SlugRefField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """DRF's reference by a natural key (a rack's name, a tier's kind, a node's hostname). Text no stored
    key can equal (``storable``) names no object, as any unknown key does: ``does_not_exist`` (a 404, the
    error naming the field), not a query the database refuses."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and not storable(data):
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.encode("unicode_escape").decode())
        return super().to_internal_value(data)
