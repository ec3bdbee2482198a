from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError

# PostgreSQL's OFFSET is a bigint; no list comes near this.
MAX_OFFSET = 10**12


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """DRF's limit/offset pages, strict: a ``limit`` or ``offset`` that is not a whole number in its
    range is a 400 naming it, as the schema says (DRF would serve the first page of 50 instead, and a
    script with a typo would read the wrong rows without knowing). A ``limit`` over ``max_limit`` is
    a valid request for the most a page holds."""

    default_limit = 50
    max_limit = 1000

    def _whole(self, request: Any, name: str, lo: int, hi: int | None) -> int | None:
        raw = request.query_params.get(name)
        if raw is None:
            return None
        bounds = f"{lo}-{hi}" if hi is not None else f"{lo} or more"
        try:
            value = int(raw)
        except ValueError:
            raise ValidationError({name: [f"must be a whole number, {bounds}, not {raw[:40]!r}"]}) from None
        if value < lo or (hi is not None and value > hi):
            raise ValidationError({name: [f"must be a whole number, {bounds}, not {value}"]})
        return value

    def get_limit(self, request: Any) -> int:
        limit = self._whole(request, self.limit_query_param, 1, None)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request: Any) -> int:
        offset = self._whole(request, self.offset_query_param, 0, MAX_OFFSET)
        return 0 if offset is None else offset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        limit, offset = super().get_schema_operation_parameters(view)
        limit["description"] = (f"Rows per page (default {self.default_limit}; a larger limit than "
                                f"{self.max_limit} gets {self.max_limit})")
        limit["schema"] = {"type": "integer", "minimum": 1}
        offset["description"] = "Rows to skip before the page (default 0)"
        offset["schema"] = {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}
        return [limit, offset]
