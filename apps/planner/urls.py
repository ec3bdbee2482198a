from django.urls import path

from apps.planner import views

urlpatterns = [
    path("planner/", views.PlannerView.as_view(), name="planner"),
]
