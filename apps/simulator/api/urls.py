from rest_framework.routers import SimpleRouter

from apps.simulator.api import views

router = SimpleRouter()
router.register("simulator/faults", views.FaultViewSet, basename="simulator-fault")

urlpatterns = router.urls
