"""python manage.py rag_stats [--json]: the index in numbers (sources, files, chunks, models, disk, jobs, queues)."""

import json
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand

from sources.stats import stats_collect


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def stats_text(stats: dict[str, Any]) -> str:
    lines = [f"files {stats['files']:,}   chunks {stats['chunks']:,} (searchable)", "", "sources"]
    lines += [
        f"  {row['kind']:<10} {row['sources']:>7,} ({row['enabled']:,} enabled)  {row['chunks']:>9,} chunks"
        for row in stats["sources"]
    ]
    lines += ["", "embedding models"]
    lines += [
        f"  {m['name']} ({m['provider']}, {m['dimensions']} dims)  {m['vectors']:,} vectors" for m in stats["models"]
    ]
    if not stats["models"]:
        lines.append("  none has embedded anything yet")
    disk = stats["disk"]
    lines += [
        "",
        f"disk  tables {size(disk['table_bytes'])}, indexes {size(disk['index_bytes'])}, "
        f"whole database {size(disk['database_bytes'])}",
    ]
    lines += [
        f"  {t['table']:<32} {size(t['table_bytes']):>10} + {size(t['index_bytes']):>10} indexes"
        for t in disk["tables"][:8]
    ]
    lines += ["", "last job per root"]
    for root in stats["roots"]:
        job = root["last_job"]
        name = root["root"] + ("" if root["enabled"] else " (disabled)")
        if job is None:
            lines.append(f"  {name}: never indexed")
            continue
        when = job["when"].strftime("%Y-%m-%d %H:%M:%S %Z") if isinstance(job["when"], datetime) else job["when"]
        message = f": {job['message'][:160]}" if job["message"] else ""
        lines.append(f"  {name}: job {job['id']} {job['state']} ({when}){message}")
    if not stats["roots"]:
        lines.append("  no workspace roots")
    lines += ["", "queues"]
    for queue, depth in stats["queues"].items():
        broker = "broker unreachable" if depth["broker"] is None else f"{depth['broker']:,} task(s) in the broker"
        lines.append(
            f"  {queue:<12} {depth['jobs_queued']:,} job(s) and {depth['items_queued']:,} item(s) queued; {broker}"
        )
    return "\n".join(lines)


class Command(BaseCommand):
    help = "The index in numbers: sources, files, chunks, models, disk, the last job of each root, queue depths."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="As JSON (times in ISO 8601, sizes in bytes).")

    def handle(self, *args, json: bool = False, **options) -> None:
        stats = stats_collect()
        self.stdout.write(_json_dumps(stats) if json else stats_text(stats))


def _json_dumps(stats: dict[str, Any]) -> str:
    return json.dumps(stats, indent=2, default=lambda value: value.isoformat())
