from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.health.api import views

router = SimpleRouter()
router.register("health/findings", views.FindingViewSet, basename="health-finding")
router.register("health/silences", views.SilenceViewSet, basename="health-silence")

urlpatterns = [
    path("health/checks/", views.CheckListView.as_view(), name="health-check-list"),
    path("health/checks/<str:name>/", views.CheckDetailView.as_view(), name="health-check-detail"),
    *router.urls,
]
