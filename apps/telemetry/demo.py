"""Demo agent keys: one per node and one for the gateway, written to
``<VAR_DIR>/agent-tokens.json`` for the simulator. Idempotent: a key already
in the file is kept while its token is valid."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from apps.agents.choices import AgentKind
from apps.agents.models import AgentToken
from apps.agents.services import agent_token_issue
from apps.audit.choices import Source
from apps.common.keys import hash_key
from apps.inventory.models import Node

ACTOR = "seed_demo"
TOKENS_FILE = settings.VAR_DIR / "agent-tokens.json"


def _read() -> dict[str, Any]:
    try:
        data = json.loads(TOKENS_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _valid(key: Any, *, kind: str, node: Node | None) -> bool:
    if not isinstance(key, str) or not key:
        return False
    return AgentToken.objects.filter(key_hash=hash_key(key), kind=kind, node=node, revoked_at__isnull=True).exists()


@transaction.atomic
def seed_telemetry_demo() -> dict[str, Any]:
    old = _read()
    old_nodes = old.get("nodes") if isinstance(old.get("nodes"), dict) else {}
    assert isinstance(old_nodes, dict)
    gateway = old.get("gateway")
    if not _valid(gateway, kind=AgentKind.GATEWAY, node=None):
        _, gateway = agent_token_issue(kind=AgentKind.GATEWAY, node=None, actor=ACTOR, note="demo gateway",
                                       source=Source.SYSTEM)
    nodes: dict[str, str] = {}
    for node in Node.objects.order_by("hostname"):
        key = old_nodes.get(node.hostname)
        if not _valid(key, kind=AgentKind.NODE, node=node):
            _, key = agent_token_issue(kind=AgentKind.NODE, node=node, actor=ACTOR, note="demo node agent",
                                       source=Source.SYSTEM)
        nodes[node.hostname] = str(key)
    data = {"gateway": gateway, "nodes": nodes}
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    # A temporary file of this process's own, renamed over the file: two seeds at once (two
    # processes on one var dir) each write whole files, and the last rename wins.
    fd, tmp_name = tempfile.mkstemp(dir=settings.VAR_DIR, prefix=".agent-tokens-", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w") as f:  # mkstemp's file is 0600 already
            f.write(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(TOKENS_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    return {"file": str(TOKENS_FILE), "nodes": len(nodes)}
