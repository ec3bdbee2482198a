from django.urls import path

from apps.planner import views

urlpatterns = [
    path("planner/", views.PlannerView.as_view(), name="planner"),
    path("static-pkg/plotly.min.js", views.plotly_js, name="plotly-js"),
]
