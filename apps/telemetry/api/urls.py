from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.telemetry.api import views

router = SimpleRouter()
router.register("node-commands", views.NodeCommandViewSet, basename="node-command")
router.register("agent-tokens", views.AgentTokenViewSet, basename="agent-token")

urlpatterns = [
    path("telemetry/", views.TelemetryIngestView.as_view(), name="api-telemetry-ingest"),
    path("agent/self/", views.AgentSelfView.as_view(), name="api-agent-self"),
    path("agent/commands/", views.AgentCommandsView.as_view(), name="api-agent-commands"),
    path("agent/commands/<int:pk>/ack/", views.AgentCommandAckView.as_view(), name="api-agent-command-ack"),
    path("fleet/snapshot/", views.FleetSnapshotView.as_view(), name="api-fleet-snapshot"),
    path("fleet/series/queue-depth/", views.QueueDepthSeriesView.as_view(), name="api-fleet-queue-depth"),
    path("fleet/series/stage-latency/", views.StageLatencySeriesView.as_view(), name="api-fleet-stage-latency"),
    path("fleet/latency/", views.LatencyPercentilesView.as_view(), name="api-fleet-latency"),
    path("fleet/nodes/<int:pk>/history/", views.NodeHistoryView.as_view(), name="api-fleet-node-history"),
    *router.urls,
]
