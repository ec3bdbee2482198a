from django.urls import path

from apps.health import views

urlpatterns = [
    path("health/", views.HealthView.as_view(), name="health"),
    path("health/findings/<int:pk>/acknowledge/", views.AcknowledgeView.as_view(), name="health-acknowledge"),
    path("health/silences/", views.SilenceView.as_view(), name="health-silence"),
]
