"""Every page the docs name by its path answers: no link in docs/*.md leads to a 404."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[1]
# `/path/` in backticks or a Markdown link to /path; placeholders (<id>, {id}, ...) are patterns, not pages.
PATH = re.compile(r"`(/[^`\s]*)`|\]\((/[^)\s]*)\)")
NOT_PAGES = ("/ws/", "/usr/", "/etc/", "/tmp/", "/work/")  # websockets and files
PREFIXES = {"/api/v1/"}  # "all under `/api/v1/`": where the API lives, not a page


def doc_paths() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for match in PATH.finditer(doc.read_text()):
            path = match.group(1) or match.group(2)
            if any(c in path for c in "<>{}") or "..." in path or path.startswith(NOT_PAGES) or path in PREFIXES:
                continue
            found.setdefault(path, set()).add(doc.name)
    return found


def test_the_docs_name_pages_at_all() -> None:
    paths = doc_paths()
    assert {"/", "/nodes/", "/racks/?metric=cpu", "/planner/"} <= set(paths)


@pytest.mark.django_db
def test_every_page_the_docs_name_answers() -> None:
    from apps.accounts.services import user_ensure

    client = Client()
    client.force_login(user_ensure(username="docs-admin", password="docs-admin-pw-1", role="admin")[0])
    missing = {path: sorted(docs) for path, docs in doc_paths().items()
               if client.get(path).status_code == 404}
    assert not missing, f"the docs name pages that answer 404: {missing}"
