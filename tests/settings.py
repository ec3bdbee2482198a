"""The settings every test process runs with: the product's own, with a fast password hasher.

pytest runs with ``--ds=tests.settings`` (pyproject.toml: an environment that names the
product's settings, as ``controlplane.engines run`` passes on, does not win over it); pytest-django
exports ``DJANGO_SETTINGS_MODULE=tests.settings``, and every
process a test starts (live stacks: web, workers, beat, writer, broadcaster, simulator)
inherits that environment, so a user a test creates can log in to a live server. Django's
default PBKDF2 (1,000,000 iterations, about 0.5 s a hash on this machine) is what production
keeps (tests/security/test_password_hashing.py checks it); the tests hash hundreds of passwords.
"""

from controlplane.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Test data need not survive a server crash: a commit does not wait for its WAL to reach the disk
# (about 2 ms a flush on this machine, and the live tests commit tens of thousands of times). The
# server is the same; only this session setting differs, in every process a test starts.
DATABASES["default"]["OPTIONS"]["options"] = "-c synchronous_commit=off"  # noqa: F405
