"""Secrets with no shape of their own, found by the name they are given.

``password: hunter2`` in YAML, ``DB_PASSWORD=...`` in .env, ``"api_key":
"..."`` in JSON, ``secret = '...'`` in code, ``postgres://user:pw@host``:
like detect-secrets' keyword and basic-auth detectors. A password-like name
flags any value that is not a placeholder or a reference; a token-like name
flags only a key-shaped value of high entropy (``values.random_kind``), since
tokens and secrets are named everywhere in code.
"""

import re
import string
from urllib.parse import unquote

from sources.secret_scan import values

PASSWORD = "password assignment"
URL = "credentials in a URL"
HIGH_ENTROPY = {"hex": "high-entropy hex secret", "base64": "high-entropy base64 secret"}

# Lines worth parsing hold one of these. str.find over the lower-cased text
# finds them several times faster than a regex alternation (measured 0.5 s
# against 4.5 s over Django's 16 MB), and only those lines are parsed.
LITERALS = ("pass", "pwd", "secret", "token", "credential", "key")
# "key" alone is everywhere in code: only a qualified one (api_key, privateKey).
_QUALIFIED_KEY = re.compile(
    r"(?:api|access|auth|private|client|account|master|signing|encryption|app|service|storage|shared|license"
    r"|subscription)[\W_]?$"
)

_MAX_NAME = 80
_NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_.-")
_KEY = rf"(?P<key>[A-Za-z_][\w.-]{{0,{_MAX_NAME}}})"
# key = "value", "key": "value", key: "value", key := "value", key == "value",
# key: str = "value": wherever the name stands (code, JSON, TOML, quoted YAML).
_QUOTED = re.compile(
    _KEY + r"(?P<close>[\"'\]]{0,2})\s*"
    r"(?::[ \t]+[A-Za-z_](?:[\w\[\]. |]|, ){0,60}?\s*(?==))?"  # an annotation before "=": `key: str = "value"`
    r"(?P<op>:=|=>|==|!=|:|=)\s*@?[rbuRB]?"
    r"(?P<q>[\"'`])(?P<value>[^\"'`\n]{0,300})(?P=q)"
)
# key: value, KEY=value, export KEY=value, - key: value: the whole line (YAML, INI, .env, properties).
_BARE = re.compile(
    r"\s*(?:-\s+)?(?:export\s+)?[\"']?" + _KEY + r"[\"']?\s*(?P<op>:=|=|:)[ \t]*"
    r"(?P<value>[^\s\"'`#|>&*!][^\s]*)[ \t]*(?:#.*)?$"
)
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_PASSWORD_WORDS = frozenset(("password", "passwd", "passphrase", "pwd", "pass", "passwort", "contrasena"))
_SHORT_PASSWORD_WORDS = frozenset(("pass", "pwd"))
_SECRET_WORDS = frozenset(
    ("secret", "secrets", "token", "apikey", "credential", "credentials", "authtoken", "accesskey")
)
# "<word> key" names a key worth keeping out ("api key", "private key"); "key" alone is a dict key.
_KEY_QUALIFIERS = frozenset(
    (
        "api",
        "access",
        "auth",
        "private",
        "secret",
        "client",
        "account",
        "master",
        "signing",
        "encryption",
        "app",
        "service",
        "storage",
        "shared",
        "license",
        "subscription",
    )
)
# Names that hold something about a secret, not the secret (gitleaks' allowlist
# does the same): its length, its file, its URL, a CSRF token (public by design).
_NOT_THE_SECRET = frozenset(
    (
        "name",
        "names",
        "id",
        "ids",
        "type",
        "types",
        "length",
        "len",
        "size",
        "file",
        "files",
        "path",
        "dir",
        "url",
        "uri",
        "endpoint",
        "field",
        "fields",
        "prefix",
        "suffix",
        "header",
        "param",
        "cookie",
        "label",
        "min",
        "max",
        "timeout",
        "ttl",
        "age",
        "expiry",
        "expires",
        "policy",
        "validators",
        "hashers",
        "reset",
        "help",
        "message",
        "mismatch",
        "input",
        "widget",
        "template",
        "format",
        "pattern",
        "regex",
        "env",
        "var",
        "count",
        "mode",
        "scheme",
        "generator",
        "backend",
        "storage",
        "algorithm",
        "scope",
        "scopes",
        "kind",
        "error",
        "errors",
        "required",
        "changed",
        "confirm",
        "confirmation",
        "hint",
        "placeholder",
        "class",
        "version",
        "manager",
        "index",
        "symbols",
        "chars",
        "characters",
        "alphabet",
        "charset",
        "strength",
        "score",
        "rules",
        "options",
        "policy",
    )
)
_NEVER_SECRET = frozenset(("csrf", "xsrf", "public", "pub", "publishable", "sri"))

# <password>value</password> (XML configuration: Maven settings, app.config).
_XML = re.compile(r"(?P<key>[A-Za-z_][\w.-]*)>(?P<value>[^<\s]{1,300})</(?P=key)>")
# scheme://user:password@host; the pattern starts with its literal, so the
# engine jumps from one "://" to the next.
_URL = re.compile(
    r"://(?P<user>[^\s:/?#@'\"<>\[\]{}]{0,128}):"
    r"(?P<password>[^\s:/?#@'\"<>]{1,128})@[A-Za-z0-9\[]"
)
URL_LITERALS = ("://",)


def _kind_of_name(key: str) -> str | None:
    """ "password", "pass" (a name ending in the short, ambiguous pass/pwd), "secret" or None."""
    words = [word.lower() for word in _WORDS.findall(key)]
    if not words or words[-1] in _NOT_THE_SECRET or _NEVER_SECRET.intersection(words):
        return None
    if (_PASSWORD_WORDS - _SHORT_PASSWORD_WORDS).intersection(words):
        return "password"
    # "pass" and "pwd" only end a name (DB_PASS, smtp_pwd): first, they are
    # code (pass_arg, PassThrough, pwd for the working directory).
    if words[-1] in _SHORT_PASSWORD_WORDS:
        return "pass"
    if _SECRET_WORDS.intersection(words):
        return "secret"
    if any(word == "key" and before in _KEY_QUALIFIERS for before, word in zip(words, words[1:], strict=False)):
        return "secret"
    return None


def _verdict(key: str, value: str, *, quoted: bool, op: str) -> str | None:
    kind = _kind_of_name(key)
    value = value.strip()
    # After a password's name, words joined by hyphens are a passphrase, even when they are a secret's words
    # (password: my-secret-password); no identifier is spelled that way.
    phrase = kind in ("password", "pass") and values.hyphenated_phrase(value)
    if (
        kind is None
        or not value
        or any(c.isspace() for c in value)
        or values.placeholder(value)
        or values.reference(value)
        or (values.names_a_secret(value) and not phrase)
    ):
        return None
    if not quoted and values.code_like(value):
        return None
    if random := values.random_kind(value):
        return PASSWORD if kind in ("password", "pass") else HIGH_ENTROPY[random]
    if kind == "secret" or len(value) < 4 or values.demo_password(value.rstrip("?")):
        return None
    # "pass" alone is as often code (allPass, bypass_pass) as a password's name:
    # there, only a value with a digit or a symbol counts.
    if kind == "pass" and re.fullmatch(r"[A-Za-z_]+", value):
        return None
    # Lower-case names (password_reset_done, set-password) are identifiers, not passwords.
    if re.fullmatch(r"[a-z]+(?:[_.-][a-z]+)+", value) and not phrase:
        return None
    # A bare word after "password =" reads as code assigning a variable
    # (password = hashed) unless it mixes letters and digits as a password
    # does (spring.datasource.password=hunter2); in YAML (":") or an
    # environment file (an upper-case NAME=) any word is the value.
    if (
        not quoted
        and op == "="
        and not key.isupper()
        and re.fullmatch(r"[A-Za-z_]\w*", value)
        and not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value))
    ):
        return None
    return PASSWORD


def assignment_found(text: str, lowered: str) -> str | None:
    """The first assignment of a secret in ``text``; ``lowered`` is ``text.lower()``."""
    if len(lowered) != len(text):
        # "İ".lower() is two characters; the keywords are ASCII, so lower only
        # ASCII (one "?" per other character keeps every offset).
        lowered = text.encode("ascii", "replace").decode("ascii").lower()
    line_end = -1
    for hit in _keyword_offsets(lowered):
        start = _name_start(text, hit)
        # Each form is matched where the name starts: one bounded attempt per
        # keyword, never a search along the line.
        if (
            (match := _QUOTED.match(text, start))
            and _closed(text, start, match["close"])
            and (verdict := _verdict(match["key"], match["value"], quoted=True, op=match["op"]))
        ):
            return verdict
        if (
            text[start - 1 : start] == "<"
            and (match := _XML.match(text, start))
            and (verdict := _verdict(match["key"], match["value"], quoted=True, op="="))
        ):
            return verdict
        if hit > line_end:
            line_start = text.rfind("\n", 0, hit) + 1
            line_end = text.find("\n", hit)
            line_end = len(text) if line_end < 0 else line_end
            if (match := _BARE.match(text, line_start, line_end)) and (
                verdict := _verdict(match["key"], match["value"], quoted=False, op=match["op"])
            ):
                return verdict
    return None


def _closed(text: str, start: int, close: str) -> bool:
    """A quoted name ("password": ...) is closed before its operator; else it sat inside a string ("Password:")."""
    opening = text[start - 1 : start]
    return opening not in ("'", '"') or opening in close


def _keyword_offsets(lowered: str) -> list[int]:
    """Where a keyword starts, in order."""
    offsets = []
    for keyword in LITERALS:
        at = lowered.find(keyword)
        while at >= 0:
            if keyword != "key" or _QUALIFIED_KEY.search(lowered, max(0, at - 14), at):
                offsets.append(at)
            at = lowered.find(keyword, at + len(keyword))
    return sorted(offsets)


def _name_start(text: str, at: int) -> int:
    """Where the name holding the keyword at ``at`` begins (DB_PASSWORD, spring.datasource.password)."""
    start = at
    while start > 0 and at - start < _MAX_NAME and text[start - 1] in _NAME_CHARACTERS:
        start -= 1
    while start < at and not (text[start].isalpha() or text[start] == "_"):
        start += 1
    return start


def url_credentials_found(text: str) -> bool:
    for match in _URL.finditer(text):
        user, password = match["user"], unquote(match["password"])
        if (
            password == user
            or any(c.isspace() for c in password)  # a phrase ("a%20secret"), as in an assignment
            or values.placeholder(password)
            or values.reference(password)
            or values.demo_password(password)
            or values.spelled_as_a_name(password)
            or password.strip("*x") == ""
        ):
            continue
        return True
    return False
