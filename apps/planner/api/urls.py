from django.urls import path

from apps.planner.api import views

urlpatterns = [
    path("planner/array/", views.ArraySizingView.as_view(), name="api-planner-array"),
    path("planner/array/chart/", views.ArrayChartView.as_view(), name="api-planner-array-chart"),
    path("planner/agents/", views.AgentSizingView.as_view(), name="api-planner-agents"),
    path("planner/cost/", views.CostComparisonView.as_view(), name="api-planner-cost"),
    path("planner/what-if/", views.WhatIfView.as_view(), name="api-planner-what-if"),
]
