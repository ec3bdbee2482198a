from django.urls import path

from apps.operations import views

urlpatterns = [
    path("operations/", views.OperationsView.as_view(), name="operations"),
    path("windows/", views.WindowsView.as_view(), name="windows"),
]
