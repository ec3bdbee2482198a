from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.agents.api import views

router = SimpleRouter()
router.register("node-commands", views.NodeCommandViewSet, basename="node-command")
router.register("agent-tokens", views.AgentTokenViewSet, basename="agent-token")
router.register("bootstrap-tokens", views.BootstrapTokenViewSet, basename="bootstrap-token")
router.register("enrolments", views.EnrolmentViewSet, basename="enrolment")

urlpatterns = [
    path("agent/self/", views.AgentSelfView.as_view(), name="api-agent-self"),
    path("agent/commands/", views.AgentCommandsView.as_view(), name="api-agent-commands"),
    path("agent/commands/<int:pk>/ack/", views.AgentCommandAckView.as_view(), name="api-agent-command-ack"),
    *router.urls,
]
