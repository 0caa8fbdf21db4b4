"""Generated source trees for indexing tests."""

from pathlib import Path

PY = '''"""Module {i}."""
import os


def handler_{i}(request):
    """Handle request number {i} for the {topic} service."""
    return {{"id": {i}, "topic": "{topic}"}}


class Worker{i}:
    def run(self):
        return os.getpid() + {i}
'''
TS = """// Component {i}
export const render{i} = (props: {{ name: string }}) => `<div>${{props.name}} {topic}</div>`;

export class Store{i} {{
  get(): number {{ return {i}; }}
}}
"""
MD = "# Guide {i}\n\n## {topic}\n\nHow to operate the {topic} part number {i}.\n"
GO = "package main\n\n// Serve{i} serves {topic}.\nfunc Serve{i}() int {{\n\treturn {i}\n}}\n"
TOPICS = ["billing", "search", "auth", "storage", "email", "payments", "analytics"]


def tree_make(root: Path, files: int = 200) -> list[str]:
    """Write ``files`` files in four languages; return their relative paths."""
    paths = []
    for i in range(files):
        topic = TOPICS[i % len(TOPICS)]
        kind = i % 4
        relative = [f"app/mod_{i}.py", f"web/comp_{i}.ts", f"docs/guide_{i}.md", f"svc/serve_{i}.go"][kind]
        template = [PY, TS, MD, GO][kind]
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(template.format(i=i, topic=topic))
        paths.append(relative)
    return paths
