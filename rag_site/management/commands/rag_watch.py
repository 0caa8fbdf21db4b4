"""`manage.py rag_watch`: the watcher of workspace roots (sources/watch.py), until SIGTERM or Ctrl-C.

A supervised child of `make run` and its own service under compose. With
RAG_WATCH off it idles instead of exiting, so neither restarts it in a loop.
"""

import signal
import threading

from django.core.management.base import BaseCommand

from rag_site.embedded import var_dir
from rag_site.healthcheck import watch_heartbeat_path
from sources.config import watch_enabled
from sources.watch import watch_run


class Command(BaseCommand):
    help = "Watch the workspace roots marked 'watch' and queue a job for just the files that change."

    def handle(self, *args, **options) -> None:
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        heartbeat = watch_heartbeat_path(var_dir())
        heartbeat.parent.mkdir(parents=True, exist_ok=True)
        heartbeat.touch()
        if not watch_enabled():
            self.stdout.write("RAG_WATCH is off: nothing is watched (roots change in search at their re-verify)")
            self.stdout.flush()
            while not stop.wait(10):
                heartbeat.touch()  # idle, and healthy: compose must not restart it in a loop
            return
        self.stdout.write("watching the workspace roots marked 'watch' (RAG_WATCH)")
        self.stdout.flush()
        watch_run(stop=stop, beat=heartbeat.touch)
