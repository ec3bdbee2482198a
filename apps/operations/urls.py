from django.urls import path

from apps.operations import views

urlpatterns = [
    path("operations/", views.OperationsView.as_view(), name="operations"),
]
