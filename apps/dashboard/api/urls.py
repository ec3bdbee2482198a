from django.urls import path

from apps.dashboard.api import views

urlpatterns = [
    path("live/snapshot/", views.LiveSnapshotView.as_view(), name="api-live-snapshot"),
    path("live/figures/fleet/", views.FleetFiguresView.as_view(), name="api-live-figures-fleet"),
    path("live/figures/tiers/<int:pk>/", views.TierFiguresView.as_view(), name="api-live-figures-tier"),
    path("live/figures/nodes/<int:pk>/", views.NodeFiguresView.as_view(), name="api-live-figures-node"),
    path("live/nodes/<int:pk>/", views.NodeLiveView.as_view(), name="api-live-node"),
    path("leases/", views.LeaseListView.as_view(), name="api-leases"),
]
