from django.urls import path

from apps.rollouts import views

urlpatterns = [
    path("rollouts/", views.RolloutListView.as_view(), name="rollout-list"),
    path("rollouts/new/", views.RolloutNewView.as_view(), name="rollout-new"),
    path("rollouts/<int:pk>/", views.RolloutDetailView.as_view(), name="rollout-detail"),
]
