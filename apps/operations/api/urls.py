from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.operations.api import views

router = SimpleRouter()
router.register("drains", views.DrainViewSet, basename="drain")
router.register("quarantines", views.QuarantineViewSet, basename="quarantine")
router.register("scale-requests", views.ScaleRequestViewSet, basename="scale-request")
router.register("autoscaler-policies", views.AutoscalerPolicyViewSet, basename="autoscaler-policy")
router.register("autoscaler-decisions", views.AutoscalerDecisionViewSet, basename="autoscaler-decision")
router.register("change-windows", views.ChangeWindowViewSet, basename="change-window")
router.register("freezes", views.FreezeViewSet, basename="freeze")

urlpatterns = [
    path("nodes/actions/", views.NodeBulkActionView.as_view(), name="node-bulk-action"),
    path("nodes/<int:pk>/cordon/", views.NodeCordonView.as_view(), name="node-cordon"),
    path("nodes/<int:pk>/drain/", views.NodeDrainView.as_view(), name="node-drain"),
    path("nodes/<int:pk>/uncordon/", views.NodeUncordonView.as_view(), name="node-uncordon"),
    path("nodes/<int:pk>/maintenance/", views.NodeMaintenanceView.as_view(), name="node-maintenance"),
    path("nodes/<int:pk>/maintenance/leave/", views.NodeMaintenanceLeaveView.as_view(),
         name="node-maintenance-leave"),
    path("nodes/<int:pk>/gray/", views.NodeGrayView.as_view(), name="node-gray"),
    path("nodes/<int:pk>/decommission/", views.NodeDecommissionView.as_view(), name="node-decommission"),
    path("modules/<int:pk>/quarantine/", views.ModuleQuarantineView.as_view(), name="module-quarantine"),
    path("modules/<int:pk>/release/", views.ModuleReleaseView.as_view(), name="module-release"),
    path("tiers/<int:pk>/scale/", views.TierScaleView.as_view(), name="tier-scale"),
    path("schedulable/", views.SchedulableView.as_view(), name="schedulable"),
    *router.urls,
]
