"""Websocket routes under /ws/."""

from apps.dashboard.routing import websocket_urlpatterns

__all__ = ["websocket_urlpatterns"]
