"""Choices that carry their badge colour: a state's value, label and colour are declared once,
on one line of its choices class, and every page, template tag and chart reads them from there.

    class NodeState(ColouredChoices):
        ACTIVE = "active", Badge("Active", "#1f7a45")

``NodeState.ACTIVE.colour`` is the colour; ``NodeState.colours()`` maps every value to its
colour; ``NodeState.colour_of(value)`` also answers for a value the class does not know. The
label stays a plain ``str`` (forms, the API and the schema see ordinary choices)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:  # the stubs' metaclass of TextChoices, which the type checker alone knows
    from django.db.models.enums import _TextChoicesType as ChoicesType
else:
    from django.db.models.enums import ChoicesType

# The colour of a state no class declares (readable with white text: tests/common/test_badge_colours.py).
FALLBACK_COLOUR = "#5f6779"


class Badge(str):
    """A choice's label with its colour: ``Badge("Active", "#1f7a45")``."""

    colour: str

    def __new__(cls, label: str, colour: str) -> Badge:
        obj = super().__new__(cls, label)
        obj.colour = colour
        return obj


class _ColouredChoicesType(ChoicesType):
    """Takes each member's colour off its label before Django's choices read value and label."""

    def __new__(metacls, classname: str, bases: tuple[type, ...], classdict: Any, **kwds: Any) -> Any:
        colours: dict[str, str] = {}
        for key in list(classdict._member_names):
            value = classdict[key]
            if isinstance(value, tuple) and value and isinstance(value[-1], Badge):
                colours[key] = value[-1].colour
                dict.__setitem__(classdict, key, (*value[:-1], str(value[-1])))
        cls = super().__new__(metacls, classname, bases, classdict, **kwds)
        members: Mapping[str, Any] = cls.__members__
        for name, member in members.items():
            member._colour_ = colours.get(name, FALLBACK_COLOUR)
        return cls


class ColouredChoices(models.TextChoices, metaclass=_ColouredChoicesType):
    """TextChoices whose members are ``NAME = value, Badge(label, colour)``."""

    _colour_: str

    @property
    def colour(self) -> str:
        return self._colour_

    @classmethod
    def colours(cls) -> dict[str, str]:
        return {m.value: m._colour_ for m in cls.__members__.values()}

    @classmethod
    def colour_of(cls, value: str, default: str = FALLBACK_COLOUR) -> str:
        for m in cls.__members__.values():
            if m.value == value:
                return m._colour_
        return default
