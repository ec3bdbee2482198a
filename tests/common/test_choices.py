"""A choices class declares each state's value, label and colour on one line; forms, the API and
the schema still see plain (value, label) choices."""

from __future__ import annotations

from apps.common.choices import FALLBACK_COLOUR
from apps.inventory.choices import NodeState


def test_a_state_carries_its_label_and_colour() -> None:
    assert NodeState.ACTIVE == "active" and NodeState.ACTIVE.label == "Active"
    assert NodeState.ACTIVE.colour == "#1f7a45"
    assert NodeState.colours()["cordoned"] == NodeState.CORDONED.colour
    assert set(NodeState.colours()) == set(NodeState.values)


def test_an_unknown_state_gets_the_fallback_colour() -> None:
    assert NodeState.colour_of("no-such-state") == FALLBACK_COLOUR
    assert NodeState.colour_of("failed") == NodeState.FAILED.colour


def test_the_labels_stay_plain_strings() -> None:
    assert ("active", "Active") in NodeState.choices
    assert all(type(label) is str for _, label in NodeState.choices)
