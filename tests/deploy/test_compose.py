"""docker-compose.yml, parsed (`docker compose config` needs Docker; this needs nothing): no
password written in it, its secrets from `.env` (which deploy/compose.env.example documents and
git ignores), and /metrics on a port that is not published."""

import re
from pathlib import Path
from typing import Any

import yaml

from app.config import Settings

ROOT = Path(__file__).resolve().parents[2]
_VARIABLE = re.compile(r"\$\{(\w+)(?::?[?-][^}]*)?\}")


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8"))
    return loaded


def env_example() -> dict[str, str]:
    lines = (ROOT / "deploy" / "compose.env.example").read_text("utf-8").splitlines()
    pairs = (line.split("=", 1) for line in lines if line and not line.startswith("#"))
    return dict(pairs)


def test_no_password_or_secret_is_written_in_the_file() -> None:
    for name, service in compose()["services"].items():
        for variable, value in (service.get("environment") or {}).items():
            text = str(value)
            if re.search(r"PASSWORD|SECRET|KEY", variable):
                assert _VARIABLE.fullmatch(text), f"{name}: {variable} is written in the file"
            # Credentials in a URL come from a variable too.
            for credentials in re.findall(r"://([^@/]*)@", text):
                _user, _, password = credentials.partition(":")
                assert not password or _VARIABLE.fullmatch(password), f"{name}: {variable}"


def test_every_variable_it_uses_is_documented_in_the_env_example_left_empty() -> None:
    text = (ROOT / "docker-compose.yml").read_text("utf-8")
    used = set(_VARIABLE.findall(text))
    example = env_example()
    assert used <= set(example)
    assert used, "the secrets come from .env"
    assert all(value == "" for value in example.values()), "the example holds no secret"
    assert compose()["services"]["omniforge"]["env_file"] == ".env"
    for ignore_file in (".gitignore", ".dockerignore"):
        assert ".env" in (ROOT / ignore_file).read_text("utf-8").splitlines(), ignore_file


def test_the_example_names_the_secrets_production_refuses_to_start_without() -> None:
    assert {"OMNIFORGE_JWT_SECRET", "OMNIFORGE_SECRETS_KEY"} <= set(env_example())


def test_metrics_are_on_a_port_that_is_not_published() -> None:
    service = compose()["services"]["omniforge"]
    settings = Settings(metrics_port=service["environment"]["OMNIFORGE_METRICS_PORT"])
    published = [str(port).rsplit(":", 1)[-1] for port in service["ports"]]
    assert published == ["8000"]
    assert str(settings.metrics_port) not in published
    assert settings.metrics_port is not None
    for name, other in compose()["services"].items():
        assert "ports" not in other or name == "omniforge", f"{name} publishes a port"


def test_a_stop_waits_longer_than_the_runs_hand_over() -> None:
    service = compose()["services"]["omniforge"]
    grace = Settings(**service.get("environment", {})).shutdown_grace_s
    stop_s = int(service["stop_grace_period"].removesuffix("s"))
    assert stop_s >= grace + 10
