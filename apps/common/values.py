"""List pages serialized from ``QuerySet.values()`` instead of model instances.

DRF builds a model instance per row and walks every field of it through
``get_attribute`` and ``to_representation``: at 100 rows of 30 fields that is
most of a list request.  ``ValuesRepresentation`` reads the serializer's own
field list once, fetches exactly those columns with ``values()`` and converts
only the types whose JSON form differs from the Python value (decimals,
dates).  The output equals the serializer's ``to_representation`` (the API
tests compare a list item with the detail response of the same object), and
the serializer stays the single description of the shape, for the schema too.

Serializer fields must map to a column, a ``__`` path or an annotation of the
queryset: a ``source`` of ``*`` or a ``SerializerMethodField`` is refused when
the plan is built, not silently skipped.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.db.models import Count, F, Func, IntegerField, QuerySet, Subquery, Window
from django.db.models.expressions import RawSQL
from django.utils import timezone
from rest_framework import ISO_8601, serializers
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from apps.common.filters import StrictFilterBackend
from apps.common.pagination import LimitOffsetPagination

_CONVERTED = (serializers.DecimalField, serializers.DateTimeField, serializers.DateField,
              serializers.TimeField, serializers.DurationField, serializers.UUIDField)


_ZERO = datetime.timedelta(0)


def _converter(field: serializers.Field[Any, Any, Any, Any], *, utc: bool) -> Callable[[Any], Any]:
    """``field.to_representation``, with the common cases done directly (same output).

    With UTC the current zone (``utc``), a datetime at offset zero is DRF's ISO form with ``Z``;
    a decimal read from a column with the field's scale formats as DRF would quantize it.
    """
    slow = field.to_representation
    if utc and isinstance(field, serializers.DateTimeField) \
            and getattr(field, "format", api_settings.DATETIME_FORMAT) == ISO_8601:
        def datetime_(value: Any) -> Any:
            if isinstance(value, datetime.datetime) and value.utcoffset() == _ZERO:
                return value.isoformat().replace("+00:00", "Z")
            return slow(value)
        return datetime_
    if isinstance(field, serializers.DecimalField) and field.decimal_places is not None \
            and getattr(field, "coerce_to_string", api_settings.COERCE_DECIMAL_TO_STRING) \
            and not field.localize and not getattr(field, "normalize_output", False):
        exponent = -field.decimal_places

        def decimal_(value: Any) -> Any:
            if isinstance(value, decimal.Decimal) and value.as_tuple().exponent == exponent:
                return f"{value:f}"
            return slow(value)
        return decimal_
    return slow


Step = tuple[str, str, Callable[[Any], Any] | None]


class ValuesRepresentation:
    def __init__(self, serializer: serializers.Serializer[Any]) -> None:
        model = getattr(getattr(serializer, "Meta", None), "model", None)
        taken = set()
        if model is not None:
            for f in model._meta.get_fields():
                taken.update({f.name, getattr(f, "attname", f.name)})
        self.lookups: list[str] = []
        self.plain: list[str] = []  # read under their own name
        self.renamed: dict[str, F] = {}  # output name -> F(lookup), e.g. rack_name -> F("rack__name")
        self.steps: list[Step] = []
        self.utc_steps: list[Step] = []
        self.generic = False  # an output name collides with a model field: copy row by row instead
        for name, field in serializer.fields.items():
            if field.write_only:
                continue
            if isinstance(field, serializers.SerializerMethodField) or field.source in ("*", None):
                raise TypeError(f"{type(serializer).__name__}.{name} has no column to read with values()")
            lookup = field.source.replace(".", "__")
            self.lookups.append(lookup)
            if name == lookup:
                self.plain.append(name)
            elif name in taken:
                self.generic = True
            else:
                self.renamed[name] = F(lookup)
            converted = isinstance(field, _CONVERTED)
            self.steps.append((name, lookup, _converter(field, utc=False) if converted else None))
            self.utc_steps.append((name, lookup, _converter(field, utc=True) if converted else None))

    def rows(self, queryset: QuerySet[Any], extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """The rows; ``extra`` names annotations of ``queryset`` read along, under their own name."""
        steps = self.utc_steps if timezone.get_current_timezone_name() == "UTC" else self.steps
        if self.generic:
            out = []
            for row in queryset.values(*self.lookups, *extra):
                item = {}
                for name, lookup, convert in steps:
                    value = row[lookup]
                    item[name] = convert(value) if convert is not None and value is not None else value
                for name in extra:
                    item[name] = row[name]
                out.append(item)
            return out
        # The rows of values() are the output already; only a few columns need converting.
        rows = list(queryset.values(*self.plain, *extra, **self.renamed))
        for name, _, convert in steps:
            if convert is not None:
                for row in rows:
                    value = row[name]
                    if value is not None:
                        row[name] = convert(value)
        return rows


_CACHE: dict[type, ValuesRepresentation] = {}


def _plan(serializer_class: type[serializers.Serializer[Any]]) -> ValuesRepresentation:
    plan = _CACHE.get(serializer_class)
    if plan is None:
        plan = _CACHE[serializer_class] = ValuesRepresentation(serializer_class())
    return plan


def values_rows(serializer_class: type[serializers.Serializer[Any]], queryset: QuerySet[Any]) -> list[dict[str, Any]]:
    """``serializer_class(many=True).data`` for ``queryset``, read with ``values()``."""
    return _plan(serializer_class).rows(queryset)


_TOTAL = "_page_total"
_ESTIMATE = "_page_estimate"

# Above this many rows in its table, an unfiltered list's ``count`` is PostgreSQL's estimate of the
# table's rows instead of a count of them: counting 40,000 rows costs more than reading the page.
ESTIMATE_COUNT_ABOVE = 5000
EXACT = "exact"  # ?count=exact asks for the exact count whatever the table's size


class ValuesPagination(LimitOffsetPagination):
    """Limit/offset paging read in ONE query: the page with ``values()`` (no instances) and the
    total count beside it, as an uncorrelated scalar subquery that PostgreSQL runs once
    (an InitPlan) on the filtered rows alone, without the page's joins and annotations.
    ``COUNT(*) OVER ()`` would do the same but joins and sorts every row before the window;
    it is used only for grouped querysets, whose rows are the groups.

    ``count`` is exact, except for an unfiltered list of a table PostgreSQL estimates at more than
    ``ESTIMATE_COUNT_ABOVE`` rows: there it is that estimate (``pg_class.reltuples``, kept by
    autovacuum's ANALYZE), ``count_exact`` is false, and ``?count=exact`` asks for the count
    itself. The estimate rides in the same query; the count's subquery sits in the other branch
    of a CASE, which PostgreSQL then never runs (both plain SQL on the table: an unfiltered list's
    joins are to-one, so its rows are the table's). The page reads one row more than it shows, so
    ``next`` is right whatever ``count`` says, and the last page's count is always exact (its
    offset plus its rows).

    Only a page past the end (no row to carry the total) or a DISTINCT queryset (where a
    count of the filtered rows is not the count of distinct rows) costs a separate count.

    Views call ``paginate_values(queryset, serializer_class)`` instead of ``paginate_queryset``;
    the response envelope is DRF's limit/offset one (``count``, ``next``, ``previous``, ``results``)
    with ``count_exact`` after ``count``.
    """

    count_exact = True

    def paginate_values(self, queryset: QuerySet[Any], serializer_class: type[serializers.Serializer[Any]],
                        request: Request) -> list[dict[str, Any]]:
        self.request = request
        self.limit = self.get_limit(request)
        if self.limit is None:  # pragma: no cover - default_limit is always set
            self.limit = self.default_limit
        self.offset = self.get_offset(request)
        self.count_exact = True
        counts = request.query_params.getlist("count")
        if counts and counts != [EXACT]:  # as the schema says: 'exact' once, or nothing
            raise serializers.ValidationError({"count": [f"must be '{EXACT}' (given once), not {counts[-1][:40]!r}"
                                             if len(counts) == 1 else f"give count once, not {len(counts)} times"]})
        plan = _plan(serializer_class)
        window = slice(self.offset, self.offset + self.limit + 1)  # one more: is there a next page?
        if queryset.query.distinct:
            self.count = self.get_count(queryset)
            return plan.rows(queryset[window])[:self.limit] if self.offset < self.count else []
        annotations: dict[str, Any] = {}
        if queryset.query.group_by is not None:  # grouped rows (e.g. racks with a node count): count the groups
            annotations[_TOTAL] = Window(Count("*"))
        elif queryset.query.where or request.query_params.get("count") == EXACT:
            annotations[_TOTAL] = Subquery(
                queryset.order_by().values(n=Func(template="COUNT(*)", output_field=IntegerField())))
        else:  # no filter: the table's rows (its joins are to-one), estimated, or counted when few
            table = connection.ops.quote_name(queryset.model._meta.db_table)
            annotations[_ESTIMATE] = RawSQL("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                                            (table,), output_field=IntegerField())
            annotations[_TOTAL] = RawSQL(
                f"SELECT CASE WHEN reltuples > %s THEN NULL ELSE (SELECT COUNT(*) FROM {table}) END "
                f"FROM pg_class WHERE oid = %s::regclass", (ESTIMATE_COUNT_ABOVE, table), output_field=IntegerField())
        rows = plan.rows(queryset.annotate(**annotations)[window], extra=tuple(annotations))
        if not rows:
            self.count = self.get_count(queryset) if self.offset > 0 else 0
            return rows
        total, estimate = rows[0][_TOTAL], int(rows[0].get(_ESTIMATE) or 0)
        for row in rows:
            for name in annotations:
                del row[name]
        more = len(rows) > self.limit
        del rows[self.limit:]
        if total is not None:
            self.count = total
        elif not more:  # the last page: its offset and rows are the count
            self.count = self.offset + len(rows)
        else:
            self.count, self.count_exact = max(estimate, self.offset + self.limit + 1), False
        return rows

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"count": self.count, "count_exact": self.count_exact, "next": self.get_next_link(),
                         "previous": self.get_previous_link(), "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        out = super().get_paginated_response_schema(schema)
        properties = out["properties"]
        properties["count"]["description"] = (
            f"How many items the list holds: exact, except for an unfiltered list of more than about "
            f"{ESTIMATE_COUNT_ABOVE:,} items, where it is the database's estimate (count_exact false; "
            f"?count=exact asks for the exact one)")
        out["properties"] = {"count": properties.pop("count"),
                             "count_exact": {"type": "boolean", "description": "Whether count is exact"},
                             **properties}
        out["required"] = ["count", "count_exact", "results"]
        return out

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [*super().get_schema_operation_parameters(view), {
            "name": "count", "required": False, "in": "query",
            "description": f"'{EXACT}': count the items exactly even where count would be an estimate",
            "schema": {"type": "string", "enum": [EXACT]}}]


class FilterBackend(StrictFilterBackend):
    """django-filter, skipped when the request names none of the FilterSet's filters:
    building a FilterSet (a deep copy of its filters and a form) costs more than
    reading a 100-row page with ``values()``."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None and not any(name in request.query_params
                                                   for name in filterset_class.base_filters):
            return queryset
        return super().filter_queryset(request, queryset, view)


LIST_FILTER_BACKENDS = [FilterBackend, SearchFilter, OrderingFilter]


class ValuesListMixin:
    """``list`` read with ``values()``, page and count in one query (``ValuesPagination``)."""

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        view: Any = self
        return self.values_page(view.filter_queryset(view.get_queryset()), view.get_serializer_class())

    def values_page(self, queryset: QuerySet[Any], serializer_class: type[serializers.Serializer[Any]]) -> Response:
        view: Any = self
        paginator = view.paginator
        if not isinstance(paginator, ValuesPagination):  # pragma: no cover - a view's misconfiguration
            raise TypeError(f"{type(self).__name__} needs ValuesPagination, not {type(paginator).__name__}")
        rows = paginator.paginate_values(queryset, serializer_class, view.request)
        return paginator.get_paginated_response(rows)
