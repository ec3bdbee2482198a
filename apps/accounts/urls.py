from django.urls import path

from apps.accounts.views import LoginView, LogoutView, SsoCallbackView, SsoLoginView

urlpatterns = [
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("sso/login/", SsoLoginView.as_view(), name="sso-login"),
    path("sso/callback/", SsoCallbackView.as_view(), name="sso-callback"),
]
