import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rag_site.settings")
# A web process answers many small queries at once: one torch thread each
# (sources/embedding/local.py, torch_threads_apply); set it to override.
os.environ.setdefault("RAG_TORCH_THREADS", "1")

application = get_wsgi_application()

from django.conf import settings  # noqa: E402 - configured by get_wsgi_application

if settings.RAG_WARMUP:
    from django.core.signals import request_finished  # noqa: E402

    _WARM_UP_UID = "rag_warm_up_after_first_page"

    def _warm_up_after_first_page(**_) -> None:
        # After the first response, not at start: loading the models took the CPU a booting web needed for its
        # first page (a restart under load answered after 41 s). Disconnected once: only one request starts it.
        if request_finished.disconnect(dispatch_uid=_WARM_UP_UID):
            from retrieval.config import WarmUpConfig
            from retrieval.warmup import warm_up_in_background

            warm_up_in_background(WarmUpConfig.from_settings())

    request_finished.connect(_warm_up_after_first_page, weak=False, dispatch_uid=_WARM_UP_UID)
