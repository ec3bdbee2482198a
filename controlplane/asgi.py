import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from apps.telemetry.ingest.asgi import TelemetryIngestApp  # noqa: E402
from controlplane.routing import websocket_urlpatterns  # noqa: E402

# POST /api/v1/telemetry/ with an agent key takes a lean path in front of Django
# (apps/telemetry/ingest/asgi.py); every other request is Django's.
application = ProtocolTypeRouter(
    {
        "http": TelemetryIngestApp(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
