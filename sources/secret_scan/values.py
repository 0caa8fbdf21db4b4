"""What a candidate secret value looks like: a placeholder, a reference, or random enough to be a key.

Pure functions over one string; the detectors decide which to ask.
"""

import math
import re

# Words that mark a documented or obvious stand-in ("AKIA...EXAMPLE",
# "your-secret-key-here", "changeme"). A random 20+ character key holds none
# of them by chance.
_PLACEHOLDER_WORDS = (
    "example",
    "sample",
    "dummy",
    "fake",
    "placeholder",
    "changeme",
    "change_me",
    "change-me",
    "redacted",
    "your",
    "xxxx",
    "****",
    "...",
    "todo",
    "insert",
    "replace",
    "notreal",
    "not_real",
    "not-a-",
)
# Whole values that docs, defaults and examples use for a password: RabbitMQ's
# guest/guest, SQLAlchemy's scott:tiger, Firebird's masterkey, foo:bar, a schema's "string", and the
# input types a password field toggles between ({type: shown ? "text" : "password"}).
_DEMO_PASSWORDS = frozenset(
    (
        "guest",
        "tiger",
        "masterkey",
        "foo",
        "bar",
        "baz",
        "qux",
        "foobar",
        "test",
        "testing",
        "demo",
        "default",
        "string",
        "pw",
        "anonymous",
        "user",
        "username",
        "name",
        "text",
        "hidden",
        "email",
    )
)
# Six equal characters in a row (T00000000, XXXXXXXX) never come out of a key generator.
_RUN = re.compile(r"(.)\1{5}")
# Public well-known values: the Azure Storage emulator's account key, printed in Microsoft's docs.
_PUBLIC_PREFIXES = ("Eby8vdM02xNOcqFlqUwJ",)
# Indirections: shell and compose variables, templates (Jinja, Helm, GitHub
# Actions), printf slots, environment lookups, secret-manager URIs.
_REFERENCE = re.compile(
    r"^(?:\$|%\(|%s$|\{\{|\{%|<|#\{|@\w+@$|!vault|vault:|op://|ref\+|arn:aws:secretsmanager)"
    r"|os\.environ|getenv|process\.env|env\(|ENV\[|\bsecrets\.",
)
# Words that say the value names a secret rather than being one: an
# identifier made of words one of which is a secret's ("password_reset_token",
# "SecretStr", "hashedPassword", "DB_PASSWORD"), or a secret's word and a
# number alone ("password123", "key_1234": stand-ins). A keyword inside a
# longer word, or beside other words and digits, is part of a value
# ("supersecretpassword1", "MySecretPassword1" are passwords, not names).
_SECRET_NAME_WORDS = frozenset(
    (
        "pass",
        "passwd",
        "password",
        "passwords",
        "passphrase",
        "passwort",
        "pwd",
        "secret",
        "secrets",
        "token",
        "tokens",
        "key",
        "keys",
        "apikey",
        "authtoken",
        "accesskey",
        "credential",
        "credentials",
    )
)
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.-]*")
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_CODE_MARKERS = frozenset("()[]{}")
_LITERALS = frozenset(("none", "null", "nil", "true", "false", "~", "undefined", "yes", "no", "on", "off", "empty"))
_TYPE_NAMES = frozenset(
    ("str", "bytes", "int", "bool", "float", "dict", "list", "object", "any", "string", "secretstr")
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]{16,}")
_BASE64 = re.compile(r"[A-Za-z0-9+/_.~-]{16,}={0,2}")

# detect-secrets' limits: hex 3.0 and base64 4.5 bits per character. Shannon
# entropy cannot exceed log2(length), so 4.5 never fires below 23 characters;
# for shorter tokens (16-32 characters are common for API keys) the limit is
# 85% of that ceiling, which a random value of that length clears and a word
# or a name does not.
HEX_LIMIT = 3.0
BASE64_LIMIT = 4.5
SHORT_VALUE_SHARE = 0.85


def stand_in(value: str) -> bool:
    """A value that says it is a stand-in ("EXAMPLE", "xxxx", "your-...") or is a published one."""
    lowered = value.lower()
    return any(word in lowered for word in _PLACEHOLDER_WORDS) or value.startswith(_PUBLIC_PREFIXES)


def placeholder(value: str) -> bool:
    """A documented or obvious stand-in for a secret, or a value no generator would produce."""
    return stand_in(value) or bool(_RUN.search(value))


def demo_password(value: str) -> bool:
    return value.lower() in _DEMO_PASSWORDS


def reference(value: str) -> bool:
    """A pointer to a secret kept elsewhere (a variable, a template slot, an environment lookup)."""
    return bool(_REFERENCE.search(value))


def names_a_secret(value: str) -> bool:
    """The name of a secret (an identifier with a secret's word in it) or a stand-in for one ("password123")."""
    if not _IDENTIFIER.fullmatch(value):
        return False
    words = [word.lower() for word in _WORDS.findall(value)]
    if not _SECRET_NAME_WORDS.intersection(words):
        return False
    return not any(c.isdigit() for c in value) or _only_secret_words_and_numbers(words)


def spelled_as_a_name(value: str) -> bool:
    """Where only a value can stand (a URL's password), a name is still spelled as one: a secret's word alone or
    with a number ("password", "key_1234") or a constant's name (DB_PASSWORD); "my-secret-password" is a value."""
    words = [word.lower() for word in _WORDS.findall(value)]
    return bool(_IDENTIFIER.fullmatch(value)) and (
        (bool(_SECRET_NAME_WORDS.intersection(words)) and _only_secret_words_and_numbers(words))
        or (value.isupper() and names_a_secret(value))
    )


def hyphenated_phrase(value: str) -> bool:
    """Three or more words joined by hyphens ("my-secret-password", "secret-password-2024",
    "correct-horse-battery-staple-key"): how passwords and passphrases are written. Names spelled with hyphens
    are rarely longer than two words (set-password, new-password, password-reset), and never a password's value
    in code, where a name has no hyphen."""
    parts = value.split("-")
    return len(parts) >= 3 and all(part.isalnum() and part.isascii() for part in parts)


def _only_secret_words_and_numbers(words: list[str]) -> bool:
    return all(word in _SECRET_NAME_WORDS or word.isdigit() for word in words)


def code_like(value: str) -> bool:
    """An unquoted value that reads as code: a call, an index, an attribute, a literal or a type."""
    return (
        bool(_CODE_MARKERS.intersection(value))
        or value.endswith((",", ";"))
        or value.lower() in _LITERALS
        or value.lower() in _TYPE_NAMES
        or bool(re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", value))
        or bool(re.fullmatch(r"[-+]?\d+(?:\.\d+)?", value))
    )


def shannon(value: str) -> float:
    """Bits per character of the value's own character distribution."""
    counts: dict[str, int] = {}
    for character in value:
        counts[character] = counts.get(character, 0) + 1
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _limit(ceiling: float, length: int) -> float:
    return min(ceiling, SHORT_VALUE_SHARE * math.log2(length))


def random_kind(value: str) -> str | None:
    """ "hex" or "base64" when the value is shaped and distributed like a generated key, else None."""
    if _UUID.fullmatch(value):
        value = value.replace("-", "")
    if _HEX.fullmatch(value):
        entropy = shannon(value)
        if value.isdigit():
            # detect-secrets' correction: long numbers (ids, timestamps) are
            # far more common than all-digit keys.
            entropy -= 1.2 / math.log2(len(value))
        return "hex" if entropy > _limit(HEX_LIMIT, len(value)) else None
    if (
        _BASE64.fullmatch(value)
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and shannon(value) > _limit(BASE64_LIMIT, len(value))
    ):
        return "base64"
    return None
