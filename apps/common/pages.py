"""What every live page needs, whatever app renders it: the websocket it listens on, where it
re-fetches its figures, the time range and the viewer's powers. The page's scripts read it from
``#dash-config`` (templates/dashboard/_scripts.html); the state badges they redraw come from the
server's own badges (``state_badge_templates``), so no page repeats a colour or a label."""

from __future__ import annotations

from typing import Any

from apps.common.roles import OPERATOR, has_role
from apps.common.views import PLOTLY_VERSION

# The history charts' time ranges: (minutes, label); the default is an hour.
TIME_RANGES = [(15, "15 m"), (60, "1 h"), (360, "6 h"), (1440, "24 h")]
DEFAULT_MINUTES = 60
SNAPSHOT_URL = "/api/v1/live/snapshot/"


def minutes_from(request: Any) -> int:
    """The chosen time range (minutes), one of TIME_RANGES; the default otherwise."""
    try:
        value = int(request.GET.get("minutes", DEFAULT_MINUTES))
    except ValueError:
        return DEFAULT_MINUTES
    return value if value in {m for m, _ in TIME_RANGES} else DEFAULT_MINUTES


def page_config(request: Any, *, socket: str, page: str, figures_url: str, **extra: Any) -> dict[str, Any]:
    """What a live page needs: its websocket, where to re-fetch, the time range and the viewer's
    powers (display only: the API enforces them)."""
    minutes = minutes_from(request)
    return {
        "minutes": minutes, "time_ranges": TIME_RANGES if figures_url else [],
        "plotly_version": PLOTLY_VERSION,
        "dash_config": {
            "page": page, "ws": socket, "minutes": minutes, "figures_url": figures_url,
            "snapshot_url": SNAPSHOT_URL, "can_operate": has_role(request.user, OPERATOR), **extra,
        },
    }
