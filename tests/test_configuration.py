"""Settings fail loudly on bad values, and every documented variable is real."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured
from django.core.management import get_commands

from rag_site import env

ROOT = Path(__file__).resolve().parent.parent


def import_settings_with(**overrides: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, **overrides}
    return subprocess.run(
        [sys.executable, "-c", "import rag_site.settings"], env=environment, capture_output=True, text=True, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [("DEBUG", "maybe"), ("RAG_EMBED_BATCH_SIZE", "lots"), ("RAG_SEARCH_MAX_K", "0"),
     ("DATABASE_URL", "mysql://x@y/z"), ("REDIS_URL", "localhost:6379")],
)
def test_a_malformed_value_fails_at_start_up_naming_the_variable(name, value):
    result = import_settings_with(**{name: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert name in result.stderr.splitlines()[-1]


def test_valid_settings_import_cleanly():
    assert import_settings_with(DEBUG="yes", RAG_EMBED_BATCH_SIZE="32").returncode == 0


def test_env_readers(monkeypatch, tmp_path):
    monkeypatch.setattr(env, "READ", set())  # keep the real registry clean
    monkeypatch.setenv("X_FLAG", "off")
    monkeypatch.setenv("X_LIST", "a, b,,c")
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env.env_bool("X_FLAG", True) is False
    assert env.env_list("X_LIST", []) == ["a", "b", "c"]
    assert env.env_str("X_SECRET") == "s3cret"
    assert env.env_int("X_UNSET", 7) == 7
    monkeypatch.setenv("X_INT", "3")
    with pytest.raises(ImproperlyConfigured, match="X_INT=3 is below the minimum 5"):
        env.env_int("X_INT", 9, minimum=5)


def documented_variables(text: str) -> set[str]:
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE))


def test_env_example_names_exactly_the_settings_variables():
    import rag_site.settings  # noqa: F401 - fills env.READ

    assert documented_variables((ROOT / ".env.example").read_text()) == env.READ


def test_readme_documents_every_variable():
    import rag_site.settings  # noqa: F401

    readme = (ROOT / "README.md").read_text()
    missing = {name for name in env.READ if f"`{name}`" not in readme}
    assert not missing, f"README.md does not document {sorted(missing)}"


# --- docker-compose.yml -------------------------------------------------------

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
APP_SERVICES = [name for name, service in COMPOSE["services"].items() if "build" in service]


def test_compose_runs_the_whole_topology():
    assert set(APP_SERVICES) >= {"web", "worker", "beat", "migrate"}
    assert COMPOSE["services"]["db"]["image"].startswith("pgvector/pgvector:")
    assert COMPOSE["services"]["redis"]["image"].startswith("redis:")
    assert "noeviction" in COMPOSE["services"]["redis"]["command"]


@pytest.mark.parametrize("service", APP_SERVICES)
def test_every_compose_command_names_a_real_entry_point(service):
    import importlib

    command = COMPOSE["services"][service]["command"]
    program, args = command[0], command[1:]
    if program == "gunicorn":
        module, _, attribute = args[0].partition(":")
        assert callable(getattr(importlib.import_module(module), attribute or "application"))
    elif program == "celery":
        assert args[0] == "-A"
        app = importlib.import_module(args[1]).celery_app
        assert args[2] in {"worker", "beat"}
        assert app.main == "rag_site"
    elif program == "python":
        assert args[0] == "manage.py" and (ROOT / "manage.py").exists()
        assert args[1] in get_commands()
    else:
        pytest.fail(f"{service}: unknown program {program!r}")


@pytest.mark.parametrize("service", APP_SERVICES)
def test_compose_variables_are_settings_variables(service):
    import rag_site.settings  # noqa: F401

    names = set(COMPOSE["services"][service]["environment"])
    assert names <= env.READ, f"unknown variables: {sorted(names - env.READ)}"


def test_the_dockerfile_copies_what_exists_and_runs_gunicorn():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, flags=re.MULTILINE):
        for path in source.split():
            assert (ROOT / path).exists(), f"Dockerfile copies missing {path}"
    assert 'CMD ["gunicorn", "rag_site.wsgi"' in dockerfile
