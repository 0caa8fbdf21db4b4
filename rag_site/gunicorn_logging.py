"""gunicorn's access log without credentials (``logger_class`` in rag_site/gunicorn_hooks.py).

gunicorn's default line names the HTTP Basic user (``%(u)s``, decoded from
the Authorization header: where a token is sent as the user name, the token)
and the raw request line with its query string (``?token=...``), and a
custom ``access_log_format`` may ask for any header or environ value. No
rag-site surface takes a credential in a URL or by Basic auth, so none of
that is anything but a leak: every atom is cleaned before the line is
formatted, whatever the format asks for.
"""

import re

from gunicorn.glogging import Logger

REDACTED = "[redacted]"

# Parameter and header names that carry a secret. Broad on purpose: a harmless parameter whose name merely
# contains one of these loses its value in the log, nothing else.
_SECRET_NAME = re.compile(r"token|key|secret|passw|pwd|auth|credential|session|cookie|signature|sig\b|code", re.I)
# One name=value pair of a query string (also after "?" in a URL): the value ends at the next separator.
_QUERY_PAIR = re.compile(r"(^|[?&;])([^=&;#?]*)=([^&;#]*)")
# scheme://user:password@ (an absolute-form request target, a Referer).
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@")
# Atoms whose value is a URL or holds one; other header and environ atoms are judged by their name.
_URL_HEADERS = frozenset({"referer", "origin", "location", "content-location"})
_URL_ENVIRON = frozenset({"raw_uri", "request_uri", "http_referer", "http_origin"})


def query_redact(query: str) -> str:
    """``query`` with the value of every secret-named parameter replaced."""
    return _QUERY_PAIR.sub(lambda m: f"{m[1]}{m[2]}={REDACTED}" if _SECRET_NAME.search(m[2]) else m[0], query)


def url_redact(url: str) -> str:
    """``url`` (absolute, or a request target like ``/path?q``) without its user info and secret parameters."""
    url = _USERINFO.sub(lambda m: f"{m[1]}{REDACTED}@", url)
    path, mark, rest = url.partition("?")
    return path + mark + query_redact(rest) if mark else url


def atoms_redact(atoms: dict) -> dict:
    """gunicorn's access-log atoms (``Logger.atoms``) with no credential left in any of them."""
    cleaned = dict(atoms)
    cleaned["u"] = "-"  # the Basic user name: never needed, sometimes the token itself
    if isinstance(cleaned.get("r"), str):
        method, _, rest = cleaned["r"].partition(" ")
        target, _, protocol = rest.rpartition(" ")
        cleaned["r"] = " ".join((method, url_redact(target), protocol)) if target else url_redact(cleaned["r"])
    for name, clean in (("q", query_redact), ("f", url_redact)):
        if isinstance(cleaned.get(name), str):
            cleaned[name] = clean(cleaned[name])
    for atom, value in atoms.items():
        if not (atom.startswith("{") and isinstance(value, str)):
            continue
        name, kind = atom[1:-2], atom[-1]  # "{authorization}i" -> ("authorization", "i")
        if kind == "e" and name == "query_string":
            cleaned[atom] = query_redact(value)
        elif name in (_URL_ENVIRON if kind == "e" else _URL_HEADERS):
            cleaned[atom] = url_redact(value)
        elif _SECRET_NAME.search(name):
            cleaned[atom] = REDACTED
    return cleaned


class RedactingLogger(Logger):
    """gunicorn's logger, whose access lines carry no credential (``atoms_redact``)."""

    def atoms(self, resp, req, environ, request_time) -> dict:
        return atoms_redact(super().atoms(resp, req, environ, request_time))
