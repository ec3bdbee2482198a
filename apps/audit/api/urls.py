from rest_framework.routers import DefaultRouter

from apps.audit.api.views import AuditEventViewSet

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("audit-events", AuditEventViewSet, basename="audit-event")

urlpatterns = router.urls
