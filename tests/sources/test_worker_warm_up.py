"""A worker process loads the default embedding model as it starts, so the first save does not wait for it."""

from sources.celery_hooks import embedding_warm_up
from sources.config import embedding_config
from sources.embedding.backends import local_name
from sources.embedding.registry import embedder_loaded, model_reference


def test_a_starting_worker_process_loads_the_default_model_in_the_background():
    config = embedding_config()
    provider, name = model_reference(config.model)
    embedding_warm_up().join(timeout=300)
    assert embedder_loaded(provider=provider, name=local_name(name, config.backend))


def test_each_prefork_child_warms_up_when_it_starts():
    from celery.signals import worker_process_init

    from rag_site.celery import app  # noqa: F401 - installing the app's hooks connects the signal

    assert embedding_warm_up in [receiver for _, receiver in worker_process_init.receivers]  # connected strongly
