from __future__ import annotations

from typing import Any

from django import template

from apps.health import selectors
from apps.health.views import findings_context

register = template.Library()


@register.inclusion_tag("health/_node_findings.html", takes_context=True)
def node_findings(context: Any, node: Any) -> dict[str, Any]:
    """The node's open findings, one card per check and cause, with the advisor's causes (node page: its
    actions are the node's and its modules' own buttons, so the cards offer none)."""
    request = context.get("request")
    return {**findings_context(selectors.open_findings(node=node), actor=None),
            "node": node, "request": request}
