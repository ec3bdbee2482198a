from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

api_v1 = [
    path("", include("apps.operations.api.urls")),
    path("", include("apps.inventory.api.urls")),
    path("", include("apps.audit.api.urls")),
    path("", include("apps.accounts.api.urls")),
    path("", include("apps.telemetry.api.urls")),
    path("", include("apps.planner.api.urls")),
    path("", include("apps.simulator.api.urls")),
    path("", include("apps.dashboard.api.urls")),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("", include("apps.accounts.urls")),
    path("", include("apps.dashboard.urls")),
    path("", include("apps.inventory.urls")),
    path("", include("apps.audit.urls")),
    path("", include("apps.telemetry.urls")),
    path("", include("apps.planner.urls")),
    path("", include("apps.operations.urls")),
]
