from django.urls import path

from apps.dashboard import views

urlpatterns = [
    path("", views.FleetDashboardView.as_view(), name="fleet-overview"),
    path("racks/", views.RackView.as_view(), name="rack-view"),
    path("tiers/<int:pk>/", views.TierView.as_view(), name="tier-detail"),
    path("nodes/", views.NodeListView.as_view(), name="node-list"),
    path("nodes/saved-view/", views.NodeSavedView.as_view(), name="node-list-saved-view"),
    path("nodes/<int:pk>/", views.NodeDetailView.as_view(), name="node-detail"),
]
