"""A tiny OpenID Connect provider for the single sign-on tests: django-oauth-toolkit's OIDC support, its
own database on the test run's PostgreSQL, run in a second process on loopback (``serve.py``).
Configured from the environment the test sets: ``PROVIDER_DB_NAME``, ``PROVIDER_DB_HOST``,
``PROVIDER_DB_PORT``, ``PROVIDER_DB_USER``, ``PROVIDER_DB_PASSWORD``, ``PROVIDER_PORT``, ``PROVIDER_RSA_KEY`` (PEM)."""

from __future__ import annotations

import os
from pathlib import Path

PORT = int(os.environ["PROVIDER_PORT"])

SECRET_KEY = "oidc-provider-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions",
                  "oauth2_provider"]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware", "django.middleware.csrf.CsrfViewMiddleware",
              "django.contrib.auth.middleware.AuthenticationMiddleware"]
ROOT_URLCONF = "tests.oidc_provider.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates",
              "DIRS": [Path(__file__).parent / "templates"],
              "OPTIONS": {"context_processors": ["django.template.context_processors.request"]}}]
DATABASES = {"default": {
    "ENGINE": "django.db.backends.postgresql", "NAME": os.environ["PROVIDER_DB_NAME"],
    "USER": os.environ.get("PROVIDER_DB_USER", ""), "PASSWORD": os.environ.get("PROVIDER_DB_PASSWORD", ""),
    "HOST": os.environ.get("PROVIDER_DB_HOST", ""), "PORT": os.environ.get("PROVIDER_DB_PORT", ""),
}}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
SESSION_COOKIE_NAME = "provider_session"  # the control plane on the same host keeps its own
CSRF_COOKIE_NAME = "provider_csrftoken"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": os.environ["PROVIDER_RSA_KEY"],
    "OIDC_ISS_ENDPOINT": f"http://127.0.0.1:{PORT}/o",
    "PKCE_REQUIRED": True,
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validators.Validator",
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email"},
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http"],
}
