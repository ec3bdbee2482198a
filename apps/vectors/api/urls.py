from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.vectors.api import views

router = SimpleRouter()
router.register("vector-suites", views.SuiteViewSet, basename="vector-suite")
router.register("vectors", views.VectorViewSet, basename="vector")
router.register("vector-runs", views.VectorRunViewSet, basename="vector-run")
router.register("vector-results", views.VectorResultViewSet, basename="vector-result")

urlpatterns = [
    path("version-combinations/<int:pk>/validate/", views.CombinationValidateView.as_view(),
         name="version-combination-validate"),
    path("agent/vectors/<str:sha256>/", views.AgentVectorView.as_view(), name="api-agent-vector"),
    *router.urls,
]
