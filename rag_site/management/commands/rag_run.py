"""`make run`: the whole product in one terminal.

manage.py has already started (or joined) the embedded PostgreSQL and
started the embedded Redis when no URLs are configured. This command
migrates, creates the first admin, starts gunicorn and the front (Caddy on
RAG_BIND, buffering slow clients before gunicorn's unix socket:
rag_site/front.py) and waits for the first page, then loads the demo skills
and starts two Celery workers (``worker`` for the bulk queue, ``interactive``
for saves: sources/queues.py), Celery beat and the watcher of workspace roots
(RAG_WATCH: sources/watch.py), as child processes until Ctrl-C, restarting
any of them that exits (rag_site/supervisor.py).
"""

import http.client
import os
import secrets
import signal
import socket
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from kernel import metrics
from rag_site.demo import demo_skills_load
from rag_site.front import front_plan, web_env
from rag_site.supervisor import Supervisor
from sources.queues import BULK, INTERACTIVE

ADMIN_USERNAME = "admin"
# How long the workers, beat and the watcher wait for the web to answer its first page before they start anyway.
WEB_FIRST_SECONDS = 60.0


def web_answers(socket_path: str, *, timeout: float = 2.0) -> bool:
    """Whether the web (gunicorn on its unix socket) answers a request, whatever the status: it is serving."""
    connection = _UnixHTTPConnection(socket_path, timeout=timeout)
    try:
        connection.request("GET", "/accounts/login/", headers={"Host": "localhost"})
        return connection.getresponse().status > 0
    except OSError:
        return False  # not listening yet, or no worker took the request in time
    finally:
        connection.close()


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, socket_path: str, *, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def web_command(*, python: str, bind: str, answers: bool | None = None) -> list[str]:
    """The web server's command line (`rag_bench search` starts the same one); ``answers``: as with a chat model
    configured (default: whether one is)."""
    # Threads, not one request per process: a slow query holds a thread, not
    # a whole worker (slow clients wait in the front: Caddy, under make run too).
    # A cited answer holds its thread while the model writes (seconds to minutes): with a chat model, each process
    # gets RAG_ANSWER_STREAMS more threads, and answers may use no others (surfaces/routes/answer.py). Without
    # them, 8 streams took all 2 x 4 threads and a search waited 10.7 s (rag_bench answers).
    threads = settings.RAG_WEB_THREADS
    if settings.RAG_LLM_BASE_URL if answers is None else answers:
        threads += settings.RAG_ANSWER_STREAMS
    return [
        python,
        "-m",
        "gunicorn",
        "rag_site.wsgi",
        f"--bind={bind}",
        f"--workers={settings.RAG_WEB_WORKERS}",
        "--worker-class=gthread",
        f"--threads={threads}",
        "--timeout=120",
        # A worker's exit clears its live metrics (kernel/metrics.py).
        "--config=python:rag_site.gunicorn_hooks",
        # JSON logs have their own line per request, with its id and route (surfaces/observability.py).
        *(["--access-logfile=-"] if settings.RAG_LOG_FORMAT == "text" else []),
    ]


def worker_command(*, python: str, queue: str, concurrency: int) -> list[str]:
    """A Celery worker consuming one queue; its node name is ``worker@host`` for bulk, ``interactive@host``."""
    node = "worker" if queue == BULK else queue
    return [
        python,
        "-m",
        "celery",
        "-A",
        "rag_site",
        "worker",
        "--loglevel=INFO",
        f"--queues={queue}",
        f"--concurrency={concurrency}",
        f"--hostname={node}@%h",
    ]


class Command(BaseCommand):
    help = "Start rag-site: migrations, admin user, demo content, Celery workers (bulk and interactive), beat, web."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-demo", action="store_true", help="Do not load the demo skills.")

    def handle(self, *args, no_demo: bool = False, **options) -> None:
        try:
            front = front_plan(
                bind=settings.RAG_BIND, var_dir=settings.VAR_DIR, trust_proxy_headers=settings.RAG_TRUST_PROXY_HEADERS
            )
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None  # before migrating: a bad RAG_BIND costs nothing
        self.stdout.write("applying migrations ...")
        call_command("migrate", interactive=False, verbosity=0)
        password = self._admin_ensure()

        settings.STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns when it is missing
        # Every child writes its metrics here and /metrics sums them (kernel/metrics.py); emptied first, so a
        # previous run's processes are not summed with this run's. Set before any child starts: each reads it once.
        os.environ[metrics.MULTIPROC_ENV] = str(metrics.multiprocess_dir_reset(settings.VAR_DIR / "metrics"))
        python = sys.executable
        supervisor = Supervisor(log_dir=settings.VAR_DIR / "log")
        # Handlers only raise a flag: a signal never lands in the middle of
        # starting a child, and the loop stops everything in order.
        stop_requested: list[bool] = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop_requested.append(True))
        try:
            # The web first, alone: the workers, beat and the watcher each import the same code and more (the
            # embedding model), and started beside it they took the CPU a booting web needed (a restart under
            # load served its first page after 41 s). Nothing a page needs waits for them.
            supervisor.start("web", web_command(python=python, bind=front.web_bind), env=web_env())
            supervisor.start("front", front.argv, env=front.env)
            self._banner(password, supervisor.log_dir)
            self._web_wait(supervisor, front.web_bind.removeprefix("unix:"), stop_requested)
            if not no_demo and not stop_requested:
                created = demo_skills_load()
                if created:
                    self.stdout.write(f"loaded {len(created)} demo skills (indexing starts with the worker)")
            if not stop_requested:
                self._workers_start(supervisor, python)
            while not stop_requested:
                for line in supervisor.check():
                    self.stderr.write(line)
                time.sleep(0.5)
            self.stdout.write("\nstopping ...")
        finally:
            supervisor.stop_all()
            self.stdout.write("stopped front, web, workers and beat")

    def _web_wait(self, supervisor: Supervisor, socket_path: str, stop_requested: list[bool]) -> None:
        """Until the web answers a page (at most WEB_FIRST_SECONDS: a web that cannot start holds nothing up)."""
        deadline = time.monotonic() + WEB_FIRST_SECONDS
        while not stop_requested and time.monotonic() < deadline and not web_answers(socket_path):
            for line in supervisor.check():
                self.stderr.write(line)
            time.sleep(0.2)

    def _workers_start(self, supervisor: Supervisor, python: str) -> None:
        # One worker per queue: a full index job holds the bulk worker for minutes, never the one saves go to.
        supervisor.start(
            "worker", worker_command(python=python, queue=BULK, concurrency=settings.RAG_WORKER_CONCURRENCY)
        )
        supervisor.start(
            "interactive",
            worker_command(python=python, queue=INTERACTIVE, concurrency=settings.RAG_INTERACTIVE_CONCURRENCY),
        )
        supervisor.start(
            "beat",
            [
                python,
                "-m",
                "celery",
                "-A",
                "rag_site",
                "beat",
                "--loglevel=INFO",
                f"--schedule={settings.VAR_DIR / 'celerybeat-schedule'}",
            ],
        )
        if settings.RAG_WATCH:
            # Watched roots (sources/watch.py): a changed file is queued for indexing within seconds.
            supervisor.start("watcher", [python, str(settings.BASE_DIR / "manage.py"), "rag_watch"])

    def _admin_ensure(self) -> str | None:
        """Create the first admin with a generated password, shown only now."""
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return None
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(ADMIN_USERNAME, email="", password=password)
        return password

    def _banner(self, password: str | None, log_dir: Path) -> None:
        host, _, port = settings.RAG_BIND.rpartition(":")
        base = f"http://{host or '127.0.0.1'}:{port}"
        lines = [
            "",
            "rag-site is running",
            f"  search page   {base}/",
            f"  admin         {base}/admin/",
            f"  API docs      {base}/api/docs",
            "  API keys      python manage.py rag_apikey create NAME [--bot-id B] (or in the admin)",
        ]
        if password:
            lines += [
                "",
                "  first run: an admin user was created (this password is not shown again);",
                "  sign in with it on the search page and in the admin",
                f"    username  {ADMIN_USERNAME}",
                f"    password  {password}",
            ]
        lines += ["", f"  logs          {log_dir}/", "  press Ctrl-C to stop everything", ""]
        self.stdout.write("\n".join(lines))
        self.stdout.flush()
