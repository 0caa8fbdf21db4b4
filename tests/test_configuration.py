"""Settings fail loudly on bad values; the registry is the one list of variables, and docs are generated from it."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured
from django.core.management import get_commands

from kernel import env
from rag_site import settings_reference, settings_registry
from rag_site.settings_registry import SETTINGS, Topic
from retrieval.choices import FusionMethod, LexicalRanking, RerankBackend
from tests.test_import_graph import ORDER

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def import_settings_with(**overrides: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, **overrides}
    return subprocess.run(
        [sys.executable, "-c", "import rag_site.settings"], env=environment, capture_output=True, text=True, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEBUG", "maybe"),
        ("RAG_EMBED_BATCH_SIZE", "lots"),
        ("RAG_SEARCH_MAX_K", "0"),
        ("DATABASE_URL", "mysql://x@y/z"),
        ("REDIS_URL", "localhost:6379"),
        ("RAG_FUSION", "best"),
        ("RAG_EMBED_LONG_TEXTS", "average"),
    ],
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
    monkeypatch.setenv("X_CHOICE", "c")
    with pytest.raises(ImproperlyConfigured, match="X_CHOICE: unknown mode 'c'; valid: a, b"):
        env.env_choice("X_CHOICE", "a", choices=("a", "b"), what="mode")


def settings_read() -> set[str]:
    """Fill env.READ: the settings, and what the embedded servers read as they start (also when they did not)."""
    import rag_site.settings  # noqa: F401
    from rag_site.embedded import replicas_setting, shared_buffers_setting

    shared_buffers_setting()
    replicas_setting()
    return set(env.READ)


def test_every_variable_the_settings_read_is_declared_in_the_registry():
    undeclared = settings_read() - set(SETTINGS)
    assert not undeclared, f"read but not declared in rag_site/settings_registry.py: {sorted(undeclared)}"


def test_every_declared_variable_is_read():
    never_read = {name for name, setting in SETTINGS.items() if setting.topic != Topic.COMPOSE} - settings_read()
    assert not never_read, f"declared in rag_site/settings_registry.py but read by nothing: {sorted(never_read)}"


def test_the_compose_topic_declares_exactly_what_only_docker_compose_reads():
    compose_topic = {name for name, setting in SETTINGS.items() if setting.topic == Topic.COMPOSE}
    assert compose_topic == compose_only_variables()


def names_read_in(path: Path) -> set[str]:
    """Variables a module reads by name: the first argument of its read_*() and env_*() calls."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            if node.func.id.startswith(("read_", "env_")) and isinstance(node.args[0], ast.Constant):
                found.add(node.args[0].value)
    return found


def test_each_setting_is_read_by_the_module_of_its_topic():
    misplaced = []
    for name, setting in SETTINGS.items():
        if setting.topic == Topic.COMPOSE:
            continue
        reader = setting.reader or f"rag_site/settings/{setting.topic}.py"
        if name not in names_read_in(ROOT / reader):
            misplaced.append(f"{name} (topic {setting.topic}) is not read by {reader}")
    assert not misplaced, misplaced


def test_the_settings_modules_read_only_through_the_registry():
    """A topic module that called kernel.env directly would read a variable with a second, undeclared default."""
    for path in sorted((ROOT / "rag_site" / "settings").glob("*.py")):
        assert "kernel.env" not in path.read_text(encoding="utf-8"), f"{path.name} bypasses the registry"


def test_a_variable_read_elsewhere_has_the_registry_default(monkeypatch):
    from rag_site.embedded import shared_buffers_setting

    monkeypatch.delenv("RAG_EMBEDDED_SHARED_BUFFERS", raising=False)
    assert shared_buffers_setting() == SETTINGS["RAG_EMBEDDED_SHARED_BUFFERS"].default_text()


def test_the_registry_and_its_generator_import_no_application_code():
    """The shell (and `make settings-docs`, with no environment) must load them whatever the apps do."""
    for module in ("settings_registry", "settings_reference"):
        tree = ast.parse((ROOT / "rag_site" / f"{module}.py").read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        packages = ORDER  # the project's packages (tests/test_import_graph.py)
        project = {name for name in imported if name.split(".")[0] in packages}
        # the kernel imports no app; its env parsers are what the registry reads with
        assert project <= {"kernel", "kernel.env", "rag_site.settings_registry"}, f"{module} imports {sorted(project)}"


def test_reading_an_undeclared_variable_fails_naming_the_registry():
    with pytest.raises(LookupError, match="RAG_NOT_DECLARED is not declared in rag_site/settings_registry.py"):
        settings_registry.read_int("RAG_NOT_DECLARED")
    with pytest.raises(TypeError, match="RAG_SEARCH_MAX_K is declared as IntSetting, read as BoolSetting"):
        settings_registry.read_bool("RAG_SEARCH_MAX_K")


def test_a_variable_declared_twice_is_refused():
    twice = [settings_registry.IntSetting(name="RAG_X", topic=Topic.SEARCH, default=1, doc="x")] * 2
    with pytest.raises(ValueError, match="RAG_X is declared twice"):
        settings_registry._index(tuple(twice))


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_default_is_within_its_bounds_and_choices(name):
    setting = SETTINGS[name]
    if isinstance(setting, settings_registry.IntSetting | settings_registry.FloatSetting):
        assert setting.minimum is None or setting.default >= setting.minimum
        assert setting.maximum is None or setting.default <= setting.maximum
    if isinstance(setting, settings_registry.ChoiceSetting):
        assert setting.default in setting.choices


@pytest.mark.parametrize(
    ("name", "choice"),
    [("RAG_LEXICAL_RANKING", LexicalRanking), ("RAG_FUSION", FusionMethod), ("RAG_RERANK_BACKEND", RerankBackend)],
)
def test_the_registry_lists_the_values_of_each_enum(name, choice):
    setting = SETTINGS[name]
    assert isinstance(setting, settings_registry.ChoiceSetting)
    assert setting.choices == tuple(member.value for member in choice)


def test_docs_and_env_example_are_what_the_registry_generates():
    stale = [str(path.relative_to(ROOT)) for path in settings_reference.stale()]
    assert not stale, f"{stale} differ from rag_site/settings_registry.py: run `make settings-docs`"


def test_the_reference_is_generated_with_no_database_and_no_environment():
    result = subprocess.run(
        [sys.executable, "-m", "rag_site.settings_reference", "--check"],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr


def test_a_stale_file_is_named_with_the_command_that_fixes_it(monkeypatch, tmp_path, capsys):
    example = tmp_path / ".env.example"
    example.write_text(settings_reference.env_example().replace("RAG_SEARCH_MAX_K=50", "RAG_SEARCH_MAX_K=60"))
    monkeypatch.setattr(settings_reference, "ENV_EXAMPLE", example)

    assert settings_reference.main(["--check"]) == 1
    assert f"{example} differs from the registry: run `make settings-docs`" in capsys.readouterr().err
    assert settings_reference.main([]) == 0
    assert settings_reference.main(["--check"]) == 0
    assert "RAG_SEARCH_MAX_K=50" in example.read_text()


def test_every_declared_variable_is_in_the_reference_and_env_example():
    reference, example = settings_reference.reference_markdown(), settings_reference.env_example()
    for name in SETTINGS:
        assert f"| `{name}` |" in reference
        assert re.search(rf"^# {name}=", example, flags=re.MULTILINE), name


# --- docker-compose.yml -------------------------------------------------------

COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE = yaml.safe_load(COMPOSE_TEXT)
APP_SERVICES = [name for name, service in COMPOSE["services"].items() if "build" in service]
# ${NAME}, ${NAME:-default}, ${NAME:?error}: compose's interpolation.
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Z_][A-Z0-9_]*)(?:(?P<operator>:-|:\?)(?P<argument>[^}]*))?\}")


def compose_only_variables() -> set[str]:
    """Variables docker-compose.yml interpolates that rag-site itself never reads (POSTGRES_PASSWORD, ...)."""
    import rag_site.settings  # noqa: F401

    return {match["name"] for match in INTERPOLATION.finditer(COMPOSE_TEXT)} - env.READ


def interpolate(value: str, given: dict[str, str]) -> str:
    """``value`` as compose reads it, with ``given`` as the .env file."""

    def substitute(match: re.Match) -> str:
        name, operator = match["name"], match["operator"]
        if given.get(name):
            return given[name]
        if operator == ":?":
            raise AssertionError(f"compose requires {name}: {match['argument']}")
        return match["argument"] if operator == ":-" else ""

    return INTERPOLATION.sub(substitute, value).replace("$$", "$")


def test_compose_runs_the_whole_topology():
    assert set(APP_SERVICES) >= {"web", "worker", "beat", "migrate"}
    assert COMPOSE["services"]["db"]["image"].startswith("pgvector/pgvector:")
    assert COMPOSE["services"]["redis"]["image"].startswith("redis:")
    assert "noeviction" in COMPOSE["services"]["redis"]["command"]


def test_compose_runs_a_worker_for_each_queue():
    from sources.queues import QUEUES

    consumed = [
        arg.removeprefix("--queues=")
        for service in COMPOSE["services"].values()
        if not service.get("profiles")  # the default topology; the gpu profile adds a second bulk worker
        for arg in service.get("command", [])
        if isinstance(arg, str) and arg.startswith("--queues=")
    ]
    assert sorted(consumed) == sorted(QUEUES)  # each queue once, by a worker of its own


def test_the_gpu_profile_adds_a_bulk_worker_on_the_gpu():
    gpu, worker = COMPOSE["services"]["worker-gpu"], COMPOSE["services"]["worker"]
    assert gpu["profiles"] == ["gpu"]
    assert gpu["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}
    ]
    assert "--queues=bulk" in gpu["command"] and gpu["command"][:4] == worker["command"][:4]
    # worker's environment and mounts, with the device, a GPU-sized batch and two threads per process on top.
    assert gpu["environment"] == {
        **worker["environment"],
        "RAG_EMBEDDING_DEVICE": "cuda",
        "RAG_EMBED_BATCH_SIZE": "512",
        "RAG_TORCH_THREADS": "2",
    }
    # Several processes store a job's vector batches at once (docs/deployment.md#a-gpu-worker).
    assert "--concurrency=4" in gpu["command"]
    assert gpu["volumes"] == worker["volumes"]
    # PyPI's torch (a CUDA build), whatever TORCH_INDEX_URL the CPU image was built with; an image of its own.
    assert gpu["build"]["args"] == {"TORCH_INDEX_URL": ""} and gpu["image"] != worker["image"]
    assert "ARG TORCH_INDEX_URL" in (ROOT / "Dockerfile").read_text()
    node = next(arg for arg in gpu["command"] if arg.startswith("--hostname=")).removeprefix("--hostname=")
    assert node.replace("%h", "$$HOSTNAME") in gpu["healthcheck"]["test"][-1]


@pytest.mark.parametrize(
    ("service", "setting"), [("worker", "RAG_WORKER_CONCURRENCY"), ("interactive", "RAG_INTERACTIVE_CONCURRENCY")]
)
def test_compose_workers_run_the_processes_make_run_does(service, setting):
    """The same setting as `make run` (rag_run.worker_command), read from .env, its default the registry's."""
    concurrency = [arg for arg in COMPOSE["services"][service]["command"] if arg.startswith("--concurrency=")]
    assert concurrency == [f"--concurrency=${{{setting}:-{SETTINGS[setting].default}}}"]
    assert interpolate(concurrency[0], {setting: "3"}) == "--concurrency=3"


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

    # prometheus-client's own variable, read by it as it loads (kernel/metrics.py), not a rag-site setting.
    names = set(COMPOSE["services"][service]["environment"]) - {"PROMETHEUS_MULTIPROC_DIR"}
    assert names <= env.READ, f"unknown variables: {sorted(names - env.READ)}"


def test_the_dockerfile_copies_what_exists_and_runs_gunicorn():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, flags=re.MULTILINE):
        for path in source.split():
            assert (ROOT / path).exists(), f"Dockerfile copies missing {path}"
    assert 'CMD ["gunicorn", "rag_site.wsgi"' in dockerfile


def test_compose_has_no_default_secrets():
    defaulted = {m["name"] for m in INTERPOLATION.finditer(COMPOSE_TEXT) if m["operator"] == ":-"}
    assert not {name for name in defaulted if re.search("PASSWORD|SECRET|KEY|TOKEN", name)}
    required = {m["name"] for m in INTERPOLATION.finditer(COMPOSE_TEXT) if m["operator"] == ":?"}
    assert required >= {"SECRET_KEY", "POSTGRES_PASSWORD", "RAG_DOMAIN"}
    assert "${POSTGRES_PASSWORD:?" in COMPOSE["services"]["db"]["environment"]["POSTGRES_PASSWORD"]
    assert "${POSTGRES_PASSWORD:?" in COMPOSE["services"]["web"]["environment"]["DATABASE_URL"]
    with pytest.raises(AssertionError, match="compose requires SECRET_KEY"):
        interpolate(COMPOSE["services"]["web"]["environment"]["SECRET_KEY"], {})


@pytest.mark.parametrize("service", sorted(COMPOSE["services"]))
def test_every_compose_service_has_a_healthcheck(service):
    definition = COMPOSE["services"][service]
    healthcheck = definition.get("healthcheck")
    assert healthcheck, f"{service} has no healthcheck"
    if definition.get("restart") == "no":  # a one-shot job (migrate): nothing stays up to check
        assert healthcheck == {"disable": True}
    else:
        assert not healthcheck.get("disable")
        assert healthcheck["test"][0] in ("CMD", "CMD-SHELL") and len(healthcheck["test"]) > 1


def test_app_healthchecks_run_real_checks():
    from django.urls import resolve

    from rag_site import healthcheck

    web = COMPOSE["services"]["web"]["healthcheck"]["test"]
    assert web[1:5] == ["python", "-m", "rag_site.healthcheck", "web"]
    path = "/" + web[5].split("://", 1)[1].split("/", 1)[1]
    assert resolve(path).url_name == "login"
    assert web[5].startswith("http://127.0.0.1:8000/")
    assert "--bind=0.0.0.0:8000" in COMPOSE["services"]["web"]["command"]
    assert COMPOSE["services"]["beat"]["healthcheck"]["test"][1:] == ["python", "-m", "rag_site.healthcheck", "beat"]
    assert healthcheck.main.__module__ == "rag_site.healthcheck"
    worker = COMPOSE["services"]["worker"]["healthcheck"]["test"]
    # The worker's default node name is celery@<container hostname>; $$ escapes compose's interpolation.
    assert "--hostname" not in " ".join(COMPOSE["services"]["worker"]["command"])
    assert worker[1].startswith("celery -A rag_site inspect ping --destination celery@$$HOSTNAME ")


def test_only_the_proxy_is_published_and_it_forwards_to_web():
    # The monitoring profile's Grafana is published too, on this host's loopback only (tests/test_monitoring.py).
    published = {
        name
        for name, service in COMPOSE["services"].items()
        if service.get("ports") and "monitoring" not in service.get("profiles", [])
    }
    assert published == {"proxy"}
    proxy = COMPOSE["services"]["proxy"]
    assert proxy["image"].startswith("caddy:")
    config = next(v.split(":")[0] for v in proxy["volumes"] if v.endswith(":/etc/caddy/Caddyfile:ro"))
    # The Caddyfile is shared with `make run` (rag_site/front.py): read it as Caddy does with compose's environment.
    from rag_site.front import caddy_executable

    environment = {
        name: interpolate(value, {"RAG_DOMAIN": "rag.example.com"}) for name, value in proxy["environment"].items()
    }
    adapted = subprocess.run(
        [caddy_executable(), "adapt", "--config", str(ROOT / config), "--adapter", "caddyfile"],
        env={"PATH": os.environ["PATH"], **environment},
        capture_output=True,
        text=True,
        check=True,
    )
    caddy = json.loads(adapted.stdout)
    server = caddy["apps"]["http"]["servers"]["srv0"]
    assert server["listen"] == [":443"] and server["routes"][0]["match"] == [{"host": ["rag.example.com"]}]
    assert '"dial":"web:8000"' in adapted.stdout.replace(" ", "")
    assert caddy["admin"]["listen"] == "127.0.0.1:2019" and "127.0.0.1:2019" in proxy["healthcheck"]["test"][-1]
    assert proxy["depends_on"]["web"]["condition"] == "service_healthy"


def test_compose_mounts_the_workspace_read_only_where_roots_may_be_registered():
    for service in APP_SERVICES:
        definition = COMPOSE["services"][service]
        mounts = [interpolate(v, {}).split(":") for v in definition.get("volumes", [])]
        read_only = {target for _, target, *mode in mounts if mode == ["ro"]}
        assert definition["environment"]["RAG_ROOT_BASE_DIRS"] in read_only


@pytest.mark.parametrize(
    "text",
    [" ".join(COMPOSE["services"]["web"]["command"]), (ROOT / "Dockerfile").read_text().split("\nCMD ", 1)[1]],
    ids=["compose", "Dockerfile"],
)
def test_gunicorn_runs_threaded_workers_with_a_timeout(text):
    assert "--worker-class=gthread" in text and "--threads=" in text and "--timeout=" in text


def test_check_deploy_is_clean_with_the_compose_environment(tmp_path):
    """`manage.py check --deploy` with web's environment from docker-compose.yml, its required
    variables given test values and DATABASE_URL pointed at the test database."""
    import secrets

    given = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "POSTGRES_PASSWORD": secrets.token_urlsafe(24),
        "RAG_DOMAIN": "rag.example.org",
    }
    environment = {
        name: interpolate(str(value), given) for name, value in COMPOSE["services"]["web"]["environment"].items()
    }
    assert environment["DEBUG"] == "false"
    environment.update(
        PATH=os.environ["PATH"],
        HOME=str(tmp_path),
        RAG_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=os.environ["DATABASE_URL"],
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=environment,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout
