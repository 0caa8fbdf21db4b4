import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rag_site.settings")
# A web process answers many small queries at once: one torch thread each
# (sources/embedding/local.py, torch_threads_apply); set it to override.
os.environ.setdefault("RAG_TORCH_THREADS", "1")

application = get_wsgi_application()

from django.conf import settings  # noqa: E402 - configured by get_wsgi_application

if settings.RAG_WARMUP:
    from retrieval.config import WarmUpConfig  # noqa: E402
    from retrieval.warmup import warm_up_in_background  # noqa: E402

    warm_up_in_background(WarmUpConfig.from_settings())
