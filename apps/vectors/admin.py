"""Vectors are immutable and runs change only through their services: the admin shows them."""

from django.contrib import admin

from apps.common.admin import ReadOnlyAdmin
from apps.vectors.models import Suite, Vector, VectorResult, VectorRun


@admin.register(Suite)
class SuiteAdmin(ReadOnlyAdmin):
    list_display = ["name", "version", "state", "published_at"]
    list_filter = ["state"]


@admin.register(Vector)
class VectorAdmin(ReadOnlyAdmin):
    list_display = ["name", "operator", "opset", "sha256", "created_at"]
    list_filter = ["operator"]
    search_fields = ["name", "sha256"]
    exclude = ["model", "inputs", "expected"]


@admin.register(VectorRun)
class VectorRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "suite", "combination", "purpose", "state", "phase", "created_at", "finished_at"]
    list_filter = ["state", "purpose"]


@admin.register(VectorResult)
class VectorResultAdmin(ReadOnlyAdmin):
    list_display = ["run", "module", "vector", "outcome", "max_abs_error"]
    list_filter = ["outcome"]
