"""The simulator has no pages (see views.py)."""

from typing import Any

urlpatterns: list[Any] = []
