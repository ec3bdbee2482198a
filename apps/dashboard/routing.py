from django.urls import path

from apps.dashboard.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/fleet/", LiveConsumer.as_asgi()),
    path("ws/tiers/<int:tier_id>/", LiveConsumer.as_asgi()),
    path("ws/nodes/<int:node_id>/", LiveConsumer.as_asgi()),
]
