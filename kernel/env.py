"""Typed environment readers for settings.

Every reader records the variable's name in ``READ`` so a test can check that
docs/configuration.md, ``.env.example`` and ``docker-compose.yml`` name only real settings.
A malformed value raises ``ImproperlyConfigured`` naming the variable, so a
typo fails at start-up instead of at the first request.
"""

import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

READ: set[str] = set()

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str) -> str | None:
    READ.add(name)
    # Secrets may come from a file (Docker/Kubernetes secrets): NAME_FILE.
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc}") from exc
    return os.environ.get(name)


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    return _number(name, default, int, "an integer", minimum, maximum)


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    return _number(name, default, float, "a number", minimum, maximum)


def _number(name, default, cast, kind, minimum, maximum):
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = cast(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not {kind}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above the maximum {maximum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_url(name: str, *, schemes: tuple[str, ...]) -> str | None:
    """A URL whose scheme is one of ``schemes``, or None when unset."""
    value = _raw(name)
    if value is None or value.strip() == "":
        return None
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a valid URL: the scheme must be one of {', '.join(schemes)}"
        )
    return value


def env_choice(name: str, default: str, *, choices: tuple[str, ...], what: str = "value") -> str:
    """One of ``choices``; anything else fails naming the valid values (``what`` names the kind in the message)."""
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}: unknown {what} {value!r}; valid: {', '.join(choices)}")
    return value


def env_pattern(name: str, default: str, *, pattern: str, valid: str, what: str = "value") -> str:
    """A value that matches the regular expression ``pattern`` whole; anything else fails naming ``valid``."""
    value = env_str(name, default)
    if re.fullmatch(pattern, value) is None:
        raise ImproperlyConfigured(f"{name}: unknown {what} {value!r}; valid: {valid}")
    return value
