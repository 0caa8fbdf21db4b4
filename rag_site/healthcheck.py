"""Health checks for docker-compose.yml: ``python -m rag_site.healthcheck web|beat|watcher``.

No Django here: a check runs every few seconds in a running container and
must cost little.

- ``web URL``: GET URL answers 200. It sends the first ALLOWED_HOSTS name as
  Host (the site answers no other) and ``X-Forwarded-Proto: https``, as the
  proxy does, so SECURE_SSL_REDIRECT does not answer with a redirect.
- ``beat``: Celery beat touched its heartbeat file recently (rag_site/beat.py
  touches it after every scheduler tick, at least every few seconds); a beat
  that is stuck, or whose ticks fail, stops touching it.
- ``watcher``: the same for the watcher of workspace roots (sources/watch.py),
  which touches its file every time it wakes (every second or two).
"""

import argparse
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

BEAT_HEARTBEAT_NAME = "beat-heartbeat"
# django-celery-beat ticks at least every 5 s; a minute is many missed ticks.
BEAT_MAX_AGE_SECONDS = 60.0


WATCH_HEARTBEAT_NAME = "watch-heartbeat"
# The watcher wakes every second, even with nothing to watch (sources/watch.py RETRY_MS, RELOAD_SECONDS).
WATCH_MAX_AGE_SECONDS = 60.0


def beat_heartbeat_path(var_dir: Path) -> Path:
    return var_dir / BEAT_HEARTBEAT_NAME


def watch_heartbeat_path(var_dir: Path) -> Path:
    return var_dir / WATCH_HEARTBEAT_NAME


def _var_dir() -> Path:
    from rag_site.embedded import var_dir  # the same RAG_VAR_DIR rule as settings

    return var_dir()


def _host() -> str:
    for name in os.environ.get("ALLOWED_HOSTS", "localhost").split(","):
        name = name.strip()
        if name and name != "*":
            return name.lstrip(".")  # ".example.org" allows example.org itself
    return "localhost"


def web_check(url: str, *, timeout: float = 5.0) -> str | None:
    """None when ``url`` answers 200, else why not."""
    request = urllib.request.Request(url, headers={"Host": _host(), "X-Forwarded-Proto": "https"})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        return f"{url}: {exc}"
    return None if status == 200 else f"{url} answered {status}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect (to https, to a login page) is an answer to report, not to follow.
    def redirect_request(self, *args, **kwargs):
        return None


def beat_check(*, var_dir: Path, max_age: float = BEAT_MAX_AGE_SECONDS) -> str | None:
    """None when beat's heartbeat file is younger than ``max_age`` seconds, else why not."""
    return _heartbeat_check("beat", beat_heartbeat_path(var_dir), max_age)


def watch_check(*, var_dir: Path, max_age: float = WATCH_MAX_AGE_SECONDS) -> str | None:
    """None when the watcher's heartbeat file is younger than ``max_age`` seconds, else why not."""
    return _heartbeat_check("watcher", watch_heartbeat_path(var_dir), max_age)


def _heartbeat_check(name: str, path: Path, max_age: float) -> str | None:
    try:
        age = time.time() - path.stat().st_mtime
    except OSError as exc:
        return f"no {name} heartbeat: {exc}"
    return None if age <= max_age else f"{name} heartbeat {path} is {age:.0f} s old"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag_site.healthcheck")
    checks = parser.add_subparsers(dest="check", required=True)
    web = checks.add_parser("web", help="the URL answers 200")
    web.add_argument("url")
    checks.add_parser("beat", help="Celery beat's heartbeat file is fresh")
    checks.add_parser("watcher", help="the watcher's heartbeat file is fresh (manage.py rag_watch)")
    options = parser.parse_args(argv)
    if options.check == "web":
        problem = web_check(options.url)
    elif options.check == "watcher":
        problem = watch_check(var_dir=_var_dir())
    else:
        problem = beat_check(var_dir=_var_dir())
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
