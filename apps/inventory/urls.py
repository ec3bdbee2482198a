from django.urls import path

from apps.inventory import views

urlpatterns = [
    path("combinations/", views.CombinationListView.as_view(), name="combination-list"),
    path("drift/", views.DriftView.as_view(), name="version-drift"),
]
