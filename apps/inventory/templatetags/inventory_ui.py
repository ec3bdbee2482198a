"""Badges for node, module and combination states, coloured from ``choices.py``."""

from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from apps.common.choices import ColouredChoices
from apps.inventory.choices import CombinationState, ModuleState, NodeState

register = template.Library()

_KINDS: dict[str, type[ColouredChoices]] = {"node": NodeState, "module": ModuleState, "combination": CombinationState}


def _text_colour(background: str) -> str:
    """Dark text on light backgrounds (cordoned yellow), white on the rest."""
    r, g, b = (int(background[i:i + 2], 16) for i in (1, 3, 5))
    return "#1c2230" if (0.299 * r + 0.587 * g + 0.114 * b) > 160 else "#fff"


@register.simple_tag
def state_badge(state: str, kind: str = "node") -> SafeString:
    choices = _KINDS[kind]
    try:
        label = choices(state).label
    except ValueError:
        label = state
    background = choices.colour_of(state, "#6b7385")
    return format_html('<span class="badge state-{}" style="background:{};color:{}">{}</span>',
                       state, background, _text_colour(background), label)


@register.simple_tag
def state_badge_templates() -> SafeString:
    """Every node and module state's badge, as the server draws it, in a ``<template>``: the live
    pages' scripts copy the one a new state needs instead of colouring their own."""
    badges = format_html_join("", '<span data-badge="{}:{}">{}</span>',
                              ((kind, value, state_badge(value, kind)) for kind in ("node", "module")
                               for value in _KINDS[kind].values))
    return format_html('<template id="state-badges">{}</template>', badges)
