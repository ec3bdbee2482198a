"""Production hashes passwords slowly; the tests (and every process they start) hash fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from django.conf import settings
from django.contrib.auth.hashers import get_hasher

from controlplane.engines import BASE_DIR


def test_it_hashes_with_a_slow_hasher_in_production() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    code = ("import django, json; django.setup(); from django.contrib.auth.hashers import get_hasher; "
            "h = get_hasher(); print(json.dumps([h.algorithm, getattr(h, 'iterations', 0)]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    algorithm, iterations = json.loads(out.stdout.strip().splitlines()[-1])
    assert algorithm in {"pbkdf2_sha256", "argon2", "scrypt"}, algorithm
    if algorithm == "pbkdf2_sha256":
        assert iterations >= 600_000, iterations


def test_the_tests_and_the_processes_they_start_hash_fast() -> None:
    # Live stacks pass this environment to every process they start.
    assert os.environ["DJANGO_SETTINGS_MODULE"] == "tests.settings"
    assert settings.PASSWORD_HASHERS == ["django.contrib.auth.hashers.MD5PasswordHasher"]
    assert get_hasher().algorithm == "md5"
