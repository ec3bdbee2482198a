from __future__ import annotations

from typing import Any

from django import template

from apps.health import selectors
from apps.health.views import decorate

register = template.Library()


@register.inclusion_tag("health/_node_findings.html", takes_context=True)
def node_findings(context: Any, node: Any) -> dict[str, Any]:
    """The node's open findings with the advisor's causes (node page)."""
    request = context.get("request")
    return {"findings": decorate(selectors.open_findings(node=node), actor=getattr(request, "user", None)),
            "node": node, "can_operate": context.get("can_operate", False), "request": request}
