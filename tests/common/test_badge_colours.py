"""Every state badge is readable: its text against its background meets WCAG AA for small text
(4.5:1). Badges are 12 px text; most are drawn with the stylesheet's white text on the state's
colour (templates set the background only, and the live pages' scripts recolour the background
only), the inventory's badges pick dark text on light colours (``state_badge``). The axe audit
walks the demo's pages, which show no rollout, no warning finding and no vector outcome but a
pass; this checks every colour of every state, shown or not."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from apps.health.choices import Severity
from apps.inventory.choices import CombinationState, ModuleState, NodeState
from apps.inventory.templatetags.inventory_ui import _text_colour
from apps.operations.choices import DrainState, ScaleState
from apps.rollouts.choices import RolloutState, Step
from apps.vectors.choices import Outcome, RunState

AA = 4.5
WHITE = "#ffffff"


def _luminance(colour: str) -> float:
    def channel(c: int) -> float:
        x = c / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
    digits = colour.lstrip("#")
    if len(digits) == 3:  # #fff
        digits = "".join(d * 2 for d in digits)
    r, g, b = (int(digits[i:i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_contrast_formula_gives_the_known_figures() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)  # the lightest grey that passes AA
    assert contrast("#fff", "#ffffff") == pytest.approx(1.0)


WHITE_TEXT: dict[str, Mapping[Any, str]] = {
    "rollout state": RolloutState.colours(), "rollout step": Step.colours(), "vector run": RunState.colours(),
    "vector outcome": Outcome.colours(), "finding severity": Severity.colours(), "drain": DrainState.colours(),
    "scale request": ScaleState.colours(),
}


@pytest.mark.parametrize("kind", sorted(WHITE_TEXT))
def test_badges_with_white_text_meet_aa(kind: str) -> None:
    poor = {str(state): f"{colour} {contrast(colour, WHITE):.2f}:1" for state, colour in WHITE_TEXT[kind].items()
            if contrast(colour, WHITE) < AA}
    assert poor == {}, f"{kind} badges below {AA}:1 with white text: {poor}"


@pytest.mark.parametrize("colours", [NodeState.colours(), ModuleState.colours(), CombinationState.colours()],
                         ids=["node", "module", "combination"])
def test_inventory_badges_meet_aa_with_the_text_colour_they_pick(colours: dict[str, str]) -> None:
    poor = {str(s): c for s, c in colours.items() if contrast(c, _text_colour(c)) < AA}
    assert poor == {}


def test_the_live_pages_fall_back_to_a_readable_colour() -> None:
    """A state the rollout page's script has no colour for is drawn in its fallback."""
    script = (Path(__file__).resolve().parents[2] / "static" / "js" / "pages" / "rollout.js").read_text()
    fallbacks = set(re.findall(r'\|\| "(#[0-9a-fA-F]{6})"', script))
    assert fallbacks, "no fallback colour found in rollout.js"
    assert all(contrast(c, WHITE) >= AA for c in fallbacks), fallbacks
