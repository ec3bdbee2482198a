"""Contexts, as kubeconfig has them: a named server URL and token each, one of them current.

The file is ``$XDG_CONFIG_HOME/cpctl/config`` (``~/.config/cpctl/config`` when unset), YAML, written
with mode 0600 (it holds tokens)::

    current-context: prod
    contexts:
    - name: prod
      server: https://cp.example.org
      token: 9f2c...

``--context NAME`` picks another context for one command; ``CPCTL_SERVER`` and ``CPCTL_TOKEN``
override the chosen context's server and token (and need no file at all when both are set).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cpctl.errors import UsageError


@dataclass
class Context:
    name: str
    server: str
    token: str


@dataclass
class Config:
    contexts: dict[str, Context] = field(default_factory=dict)
    current: str | None = None


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "cpctl" / "config"


def _text(value: Any, where: str, path: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{path}: {where}: must be a non-empty string")
    return value.strip()


def load(path: Path) -> Config:
    """The config at ``path`` (empty when there is none). A malformed file is a usage error naming
    the path in the file that is wrong; nothing is guessed."""
    if not path.exists():
        return Config()
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: must be a mapping with contexts and current-context")
    unknown = sorted(set(data) - {"contexts", "current-context"})
    if unknown:
        raise UsageError(f"{path}: {unknown[0]}: unknown key (expected contexts, current-context)")
    items = data.get("contexts")
    items = [] if items is None else items
    if not isinstance(items, list):
        raise UsageError(f"{path}: contexts: must be a list")
    config = Config()
    for i, item in enumerate(items):
        where = f"contexts[{i}]"
        if not isinstance(item, dict):
            raise UsageError(f"{path}: {where}: must be a mapping with name, server and token")
        name = _text(item.get("name"), f"{where}.name", path)
        if name in config.contexts:
            raise UsageError(f"{path}: {where}.name: context {name!r} is defined twice")
        config.contexts[name] = Context(name=name, server=_text(item.get("server"), f"{where}.server", path),
                                        token=_text(item.get("token"), f"{where}.token", path))
    current = data.get("current-context")
    if current is not None:
        current = _text(current, "current-context", path)
        if current not in config.contexts:
            raise UsageError(f"{path}: current-context: no context is named {current!r}")
    config.current = current
    return config


def save(config: Config, path: Path) -> None:
    """Write the file whole (a temporary file renamed over it), mode 0600 from its first byte."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data: dict[str, Any] = {
        "current-context": config.current,
        "contexts": [{"name": c.name, "server": c.server, "token": c.token} for c in config.contexts.values()],
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-")  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(data, out, sort_keys=False, default_flow_style=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def set_context(config: Config, *, name: str, server: str | None, token: str | None) -> Context:
    """Create the context or change the fields given; the first context becomes the current one."""
    old = config.contexts.get(name)
    if old is None:
        if not server or not token:
            raise UsageError(f"context {name!r} is new: give both --server and --token")
        ctx = Context(name=name, server=normalise_server(server), token=token)
    else:
        ctx = Context(name=name, server=normalise_server(server) if server else old.server, token=token or old.token)
    config.contexts[name] = ctx
    if config.current is None:
        config.current = name
    return ctx


def normalise_server(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--server {url!r}: must start with https:// (or http:// on a trusted network)")
    return url


def resolve(config: Config, *, context: str | None, env: Mapping[str, str] | None = None) -> Context:
    """The server and token a command uses: ``--context`` or the current context, each field
    overridden by ``CPCTL_SERVER`` / ``CPCTL_TOKEN``."""
    env = os.environ if env is None else env
    name = context or config.current
    if context is not None and context not in config.contexts:
        known = ", ".join(sorted(config.contexts)) or "none"
        raise UsageError(f"--context {context}: no such context (known: {known})")
    base = config.contexts.get(name) if name else None
    server = env.get("CPCTL_SERVER") or (base.server if base else "")
    token = env.get("CPCTL_TOKEN") or (base.token if base else "")
    if not server or not token:
        missing = " and ".join(w for w, v in (("server", server), ("token", token)) if not v)
        raise UsageError(f"no {missing} to use: run `cpctl config set-context NAME --server URL --token TOKEN`, "
                         "or set CPCTL_SERVER and CPCTL_TOKEN")
    return Context(name=name or "(environment)", server=normalise_server(server), token=token)
