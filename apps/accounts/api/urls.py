from django.urls import path

from apps.accounts.api.views import MeView

urlpatterns = [path("me/", MeView.as_view(), name="api-me")]
