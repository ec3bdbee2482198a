"""cpctl's contexts: the file, where it lives, its mode, and what overrides it."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from cpctl import config
from cpctl.cli import main
from cpctl.errors import UsageError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("CPCTL_SERVER", raising=False)
    monkeypatch.delenv("CPCTL_TOKEN", raising=False)
    return tmp_path / "home"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_it_writes_contexts_to_the_config_dir_mode_0600_and_the_first_becomes_current(home: Path) -> None:
    assert run("config", "set-context", "lab", "--server", "http://127.0.0.1:8000/", "--token", "t-lab")[0] == 0
    assert run("config", "set-context", "prod", "--server", "https://cp.example.org", "--token", "t-prod")[0] == 0
    path = home / ".config" / "cpctl" / "config"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    cfg = config.load(path)
    assert cfg.current == "lab" and cfg.contexts["lab"].server == "http://127.0.0.1:8000"
    code, out, _ = run("config", "get-contexts")
    assert code == 0
    assert out.splitlines() == ["CURRENT   NAME   SERVER", "*         lab    http://127.0.0.1:8000",
                                "          prod   https://cp.example.org"]
    assert "t-prod" not in out  # tokens are never printed
    assert run("config", "use-context", "prod")[0] == 0
    assert run("config", "current-context")[1] == "prod\n"
    # A changed token keeps the server; the file stays 0600 after every write.
    assert run("config", "set-context", "prod", "--token", "t-rotated")[0] == 0
    assert config.load(path).contexts["prod"].server == "https://cp.example.org"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_it_honours_xdg_config_home(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert run("config", "set-context", "lab", "--server", "http://lab", "--token", "t")[0] == 0
    assert (tmp_path / "xdg" / "cpctl" / "config").exists()
    assert not (home / ".config").exists()


def test_context_flag_and_environment_choose_the_server_and_token() -> None:
    cfg = config.Config()
    config.set_context(cfg, name="lab", server="http://lab:8000", token="t-lab")
    config.set_context(cfg, name="prod", server="https://prod", token="t-prod")
    assert config.resolve(cfg, context=None, env={}).server == "http://lab:8000"
    assert config.resolve(cfg, context="prod", env={}).token == "t-prod"
    # Each variable overrides its own field of the chosen context.
    ctx = config.resolve(cfg, context="prod", env={"CPCTL_TOKEN": "t-env"})
    assert (ctx.server, ctx.token) == ("https://prod", "t-env")
    ctx = config.resolve(config.Config(), context=None, env={"CPCTL_SERVER": "http://x/", "CPCTL_TOKEN": "t"})
    assert (ctx.server, ctx.token) == ("http://x", "t")
    with pytest.raises(UsageError, match="no such context"):
        config.resolve(cfg, context="staging", env={})
    with pytest.raises(UsageError, match="no token to use"):
        config.resolve(config.Config(), context=None, env={"CPCTL_SERVER": "http://x"})


@pytest.mark.parametrize(("text", "error"), [
    ("contexts: {}\n", "contexts: must be a list"),
    ("contexts:\n- name: a\n  server: http://a\n", r"contexts\[0\].token: must be a non-empty string"),
    ("contexts:\n- {name: a, server: http://a, token: t}\n- {name: a, server: http://b, token: u}\n",
     r"contexts\[1\].name: context 'a' is defined twice"),
    ("current-context: b\ncontexts:\n- {name: a, server: http://a, token: t}\n", "current-context: no context"),
    ("users: []\n", "users: unknown key"),
    ("contexts: [\n", "not valid YAML"),
])
def test_a_malformed_file_is_a_usage_error_naming_the_path_in_it(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(UsageError, match=error):
        config.load(path)


def test_a_broken_file_exits_2_and_a_missing_context_too(home: Path) -> None:
    path = home / ".config" / "cpctl" / "config"
    path.parent.mkdir(parents=True)
    path.write_text("contexts: 3\n")
    code, _, err = run("version")
    assert code == 2 and "contexts: must be a list" in err
    path.unlink()
    code, _, err = run("version")
    assert code == 2 and "cpctl config set-context" in err
    assert run("config", "use-context", "nowhere")[0] == 2
