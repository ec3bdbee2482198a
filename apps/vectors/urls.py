from django.urls import path

from apps.vectors import views

urlpatterns = [
    path("versions/", views.VersionsView.as_view(), name="versions"),
    path("vector-runs/<int:pk>/", views.RunDetailView.as_view(), name="vector-run-detail"),
]
