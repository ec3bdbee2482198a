"""The web process (uvicorn, ASGI) serves static files and plotly.js without Django's warning
that a streamed response's synchronous iterator had to be consumed whole first."""

from __future__ import annotations

import httpx
import pytest

from tests.live.stack import LiveStack

pytestmark = pytest.mark.live

SYNC_ITERATOR_WARNING = "StreamingHttpResponse must consume synchronous iterators"


def test_it_streams_files_under_asgi_without_the_sync_iterator_warning(live_stack: LiveStack) -> None:
    live_stack.web(writer=False)
    bodies = {}
    for path in ["/static/css/app.css", "/static/js/pages/node.js", "/static-pkg/plotly.min.js"]:
        res = httpx.get(f"{live_stack.url}{path}", headers={"Accept-Encoding": "identity"}, timeout=10)
        assert res.status_code == 200, path
        bodies[path] = res.content
    assert b"box-sizing" in bodies["/static/css/app.css"]
    assert b"refreshNode" in bodies["/static/js/pages/node.js"]
    assert len(bodies["/static-pkg/plotly.min.js"]) > 1_000_000
    assert live_stack.web_proc is not None
    assert SYNC_ITERATOR_WARNING not in live_stack.web_proc.log()
