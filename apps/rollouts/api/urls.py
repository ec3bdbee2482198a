from rest_framework.routers import SimpleRouter

from apps.rollouts.api import views

router = SimpleRouter()
router.register("rollouts", views.RolloutViewSet, basename="rollout")

urlpatterns = [*router.urls]
