"""Driver and framework versions compare as versions: a rollout's downgrade gate reads them."""

from __future__ import annotations

import pytest

from apps.inventory.versions import is_older


@pytest.mark.parametrize(("version", "than", "older"), [
    ("2.2.9", "2.3.1", True),
    ("2.10.0", "2.9.1", False),  # as text it would be older
    ("2.9.1", "2.10.0", True),
    ("2.3", "2.3.0", False),  # the same release
    ("2.3.0", "2.3", False),
    ("2.4.0rc1", "2.4.0", True),
    ("1.18.0", "1.18.0", False),
    ("535.104.05-1ubuntu2", "535.129.03-1ubuntu1", True),  # not PEP 440: its numbers in order
    ("535.129.03-1ubuntu1", "535.104.05-1ubuntu2", False),
])
def test_it_compares_versions_as_versions(version: str, than: str, older: bool) -> None:
    assert is_older(version, than) is older
