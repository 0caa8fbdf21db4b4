"""Tools (JSON function schemas) as one searchable chunk each."""

from jsonschema import Draft202012Validator, SchemaError

from kernel.errors import ApplicationError
from sources import ingest
from sources.config import IndexingConfig, indexing_config
from sources.ingest import IndexOutcome
from sources.models import Source, Tool, source_key


def tool_parameters_validate(parameters: object) -> None:
    """The arguments schema must be a valid JSON Schema of an object."""
    if not isinstance(parameters, dict):
        raise ApplicationError("parameters must be a JSON object (a JSON Schema)")
    if parameters and parameters.get("type", "object") != "object":
        raise ApplicationError('parameters must describe an object: "type": "object"')
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "the schema"
        raise ApplicationError(f"parameters is not a valid JSON Schema at {where}: {exc.message}") from None


def tool_text(tool: Tool) -> str:
    """What the search sees: name, server, description and every parameter."""
    lines = [tool.name.replace("_", " ") + f" ({tool.name})"]
    if tool.server:
        lines.append(f"server: {tool.server}")
    if tool.description:
        lines.append(tool.description)
    properties = (tool.parameters or {}).get("properties", {}) or {}
    required = set((tool.parameters or {}).get("required", []) or [])
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type", "any")
        note = " (required)" if name in required else ""
        lines.append(f"- {name}: {kind}{note} {spec.get('description', '')}".rstrip())
    return "\n".join(lines)


def tool_index(*, tool_id: int, config: IndexingConfig | None = None) -> IndexOutcome | None:
    """Embed the tool unless its fingerprint is unchanged; None if it was deleted meanwhile."""
    config = config or indexing_config()
    tool = Tool.objects.filter(pk=tool_id).first()
    if tool is None:
        return None
    text = tool_text(tool)
    labels = {"language": "tool", "symbol": tool.key, "metadata": {"tool": tool.key}}
    return ingest.item_index_whole(tool, source=tool_source_sync(tool), text=text, labels=labels, config=config)


def tool_source_sync(tool: Tool) -> Source:
    """The tool's Source row with its scope; called on every save, so scope applies at once."""
    fields = {"key": source_key(tool), "title": tool.key, "enabled": tool.enabled, **tool.scope_fields}
    if tool.source_id and Source.objects.filter(pk=tool.source_id).update(**fields):
        return Source.objects.get(pk=tool.source_id)  # a renamed tool keeps its row: no stale copy stays searchable
    source, _ = Source.objects.update_or_create(key=fields["key"], defaults={**fields, "kind": Source.Kind.TOOL})
    if tool.source_id != source.pk:
        Tool.objects.filter(pk=tool.pk).update(source=source)
        tool.source = source
    return source


def tool_index_failed(*, tool_id: int, reason: str) -> None:
    ingest.item_failed(Tool, tool_id, reason)
