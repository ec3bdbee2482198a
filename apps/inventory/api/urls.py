from rest_framework.routers import DefaultRouter

from apps.inventory.api import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("racks", views.RackViewSet, basename="rack")
router.register("tiers", views.TierViewSet, basename="tier")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("module-types", views.ModuleTypeViewSet, basename="module-type")
router.register("modules", views.ModuleViewSet, basename="module")
router.register("driver-releases", views.DriverReleaseViewSet, basename="driver-release")
router.register("framework-releases", views.FrameworkReleaseViewSet, basename="framework-release")
router.register("version-combinations", views.VersionCombinationViewSet, basename="version-combination")
router.register("external-endpoints", views.ExternalEndpointViewSet, basename="external-endpoint")

urlpatterns = router.urls
