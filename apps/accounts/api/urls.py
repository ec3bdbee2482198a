from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.accounts.api.views import MeView, ServiceAccountViewSet, ServiceTokenRevokeView

router = SimpleRouter()
router.register("service-accounts", ServiceAccountViewSet, basename="service-account")

urlpatterns = [
    path("me/", MeView.as_view(), name="api-me"),
    path("service-accounts/<int:pk>/tokens/<int:token_id>/revoke/", ServiceTokenRevokeView.as_view(),
         name="api-service-token-revoke"),
    *router.urls,
]
