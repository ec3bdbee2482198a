from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError

# PostgreSQL's OFFSET is a bigint; no list comes near this.
MAX_OFFSET = 10**12


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000

    def get_offset(self, request: Any) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            raise ValidationError({self.offset_query_param: [f"must be at most {MAX_OFFSET}"]})
        return offset
