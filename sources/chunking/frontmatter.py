"""YAML front matter: a leading ``---`` block, removed from the body."""

from dataclasses import dataclass, field
from typing import Any

import yaml

_CLOSERS = {"---", "..."}
# Front matter is a few lines of metadata; past this it is refused, so no
# parse of it can be slow or large.
MAX_FRONT_MATTER_CHARS = 20_000


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without anchors and aliases: "billion laughs" documents
    expand aliases exponentially (a 400-character front matter took seconds
    and gigabytes); metadata never needs them."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases (*name) are not supported in front matter", event.start_mark
            )
        return super().compose_node(parent, index)


@dataclass(frozen=True, slots=True)
class FrontMatter:
    data: dict[str, Any] = field(default_factory=dict)
    # Number of leading lines the front matter occupies (0 when absent).
    line_count: int = 0
    error: str = ""


def front_matter_split(lines: list[str]) -> FrontMatter:
    """Parse front matter at the top of ``lines``; never raises."""
    if not lines or lines[0].rstrip() != "---":
        return FrontMatter()
    for index in range(1, len(lines)):
        if lines[index].rstrip() in _CLOSERS:
            break
    else:
        # An opening fence without a closing one is a thematic break, not
        # front matter (the way CommonMark renderers treat it).
        return FrontMatter()
    raw = "\n".join(lines[1:index])
    if len(raw) > MAX_FRONT_MATTER_CHARS:
        return FrontMatter(
            line_count=index + 1,
            error=f"front matter is {len(raw):,} characters; the limit is {MAX_FRONT_MATTER_CHARS:,}",
        )
    try:
        data = yaml.load(raw, Loader=_NoAliasLoader) if raw.strip() else {}  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        return FrontMatter(line_count=index + 1, error=f"front matter is not valid YAML{where}: {problem}")
    if not isinstance(data, dict):
        return FrontMatter(line_count=index + 1, error="front matter must be a YAML mapping (key: value lines)")
    # Dates and other YAML scalars become strings so the metadata is JSON.
    return FrontMatter(data={str(k): _jsonable(v) for k, v in data.items()}, line_count=index + 1)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
