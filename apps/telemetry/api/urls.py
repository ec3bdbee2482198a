from django.urls import path

from apps.telemetry.api import views

urlpatterns = [
    path("telemetry/", views.TelemetryIngestView.as_view(), name="api-telemetry-ingest"),
    path("fleet/snapshot/", views.FleetSnapshotView.as_view(), name="api-fleet-snapshot"),
    path("fleet/series/queue-depth/", views.QueueDepthSeriesView.as_view(), name="api-fleet-queue-depth"),
    path("fleet/series/stage-latency/", views.StageLatencySeriesView.as_view(), name="api-fleet-stage-latency"),
    path("fleet/latency/", views.LatencyPercentilesView.as_view(), name="api-fleet-latency"),
    path("fleet/nodes/<int:pk>/history/", views.NodeHistoryView.as_view(), name="api-fleet-node-history"),
]
