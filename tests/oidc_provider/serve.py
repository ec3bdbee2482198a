"""Run the test provider: migrate its database, create the control plane's client and the users, serve
on 127.0.0.1:<PROVIDER_PORT> until killed. Prints ``ready`` once it listens.

Environment (besides settings.py's): ``PROVIDER_CLIENT_ID``, ``PROVIDER_CLIENT_SECRET``,
``PROVIDER_REDIRECT_URIS`` (space-separated), ``PROVIDER_USERS`` (``name:password:group+group`` items,
comma-separated)."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.core.servers.basehttp import WSGIServer, run
    from oauth2_provider.models import get_application_model

    call_command("migrate", verbosity=0, interactive=False)
    Application = get_application_model()
    Application.objects.filter(client_id=os.environ["PROVIDER_CLIENT_ID"]).delete()
    Application.objects.create(
        name="control plane", client_id=os.environ["PROVIDER_CLIENT_ID"],
        client_secret=os.environ["PROVIDER_CLIENT_SECRET"], client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE, skip_authorization=True,
        redirect_uris=os.environ["PROVIDER_REDIRECT_URIS"], algorithm=Application.RS256_ALGORITHM,
        post_logout_redirect_uris=os.environ["PROVIDER_REDIRECT_URIS"].replace("/sso/callback/", "/login/"))
    for item in filter(None, os.environ.get("PROVIDER_USERS", "").split(",")):
        name, password, groups = item.split(":")
        user, _ = User.objects.get_or_create(username=name, defaults={"email": f"{name}@example.test"})
        user.set_password(password)
        user.save()
        user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups.split("+") if g])
    from django.core.wsgi import get_wsgi_application

    handler = get_wsgi_application()
    print("ready", flush=True)
    sys.stdout.flush()
    run("127.0.0.1", int(os.environ["PROVIDER_PORT"]), handler, ipv6=False, threading=True, server_cls=WSGIServer)


if __name__ == "__main__":
    main()
