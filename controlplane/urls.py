from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from apps.common.views import healthz, plotly_js, readyz
from apps.dashboard.metrics import metrics

handler404 = "apps.common.views.not_found"

api_v1 = [
    path("", include("apps.operations.api.urls")),
    path("", include("apps.inventory.api.urls")),
    path("", include("apps.audit.api.urls")),
    path("", include("apps.accounts.api.urls")),
    path("", include("apps.agents.api.urls")),
    path("", include("apps.telemetry.api.urls")),
    path("", include("apps.planner.api.urls")),
    path("", include("apps.simulator.api.urls")),
    path("", include("apps.dashboard.api.urls")),
    path("", include("apps.health.api.urls")),
    path("", include("apps.vectors.api.urls")),
    path("", include("apps.rollouts.api.urls")),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("static-pkg/plotly.min.js", plotly_js, name="plotly-js"),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: no inline script (CSP).
    # templates/api_docs.html: the package's page with lang="en" (accessibility audit, tests/browser/test_axe.py)
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="api_docs.html"),
         name="api-docs"),
    path("", include("apps.accounts.urls")),
    path("", include("apps.dashboard.urls")),
    path("", include("apps.inventory.urls")),
    path("", include("apps.agents.urls")),
    path("", include("apps.audit.urls")),
    path("", include("apps.planner.urls")),
    path("", include("apps.operations.urls")),
    path("", include("apps.health.urls")),
    path("", include("apps.vectors.urls")),
    path("", include("apps.rollouts.urls")),
]
