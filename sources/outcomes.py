"""What an index job did, in one line a person can trust: counts, what was left out and why, and its level.

Pure Python over a job's stored counters. A job that succeeded but indexed
nothing (an empty root, a root whose every file was skipped) is a warning,
not a success: something is most likely misconfigured. A cancelled or
failed job says how far it got. Every file the job did not index is
counted by reason, including those the walk left out without a line of
their own (patterns, .gitignore); directories pruned whole (exclude_dirs,
a .gitignore'd directory) are counted as directories, since counting the
files inside them would mean walking exactly the trees they exist to skip
(node_modules, .git: often more files than the rest of the root).
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from kernel.words import counted
from sources.walk import EXCLUDED_DIRECTORY, GITIGNORED, GITIGNORED_DIRECTORY, NOT_INCLUDED

Level = Literal["success", "warning", "error", "info"]
SUCCESS: Final = "success"
WARNING: Final = "warning"
ERROR: Final = "error"
INFO: Final = "info"

# How the walk's reasons for leaving files out read in a summary ("3,456 left out by the patterns").
_LEFT_OUT_WORDS = {
    NOT_INCLUDED: ("file", "files", "not matching the root's patterns"),
    GITIGNORED: ("file", "files", "ignored by .gitignore"),
    EXCLUDED_DIRECTORY: ("directory", "directories", "excluded by name (exclude_dirs)"),
    GITIGNORED_DIRECTORY: ("directory", "directories", "ignored by .gitignore"),
}
_KIND_MAX_CHARS = 60


def reason_kind(reason: str) -> str:
    """The kind of a skip or failure reason, without its particulars: "too large: 912,301 bytes" -> "too large".

    Counted per kind, a job's reasons say what happened without naming a
    path (paths are shown only to those who may see the file's segment).
    """
    if reason.startswith("parent directory"):
        return "parent directory is a symlink or changed"
    if reason.startswith("unsafe path"):
        return "unsafe path"
    kind = reason.split(":", 1)[0].split(" (", 1)[0].strip()
    return kind[:_KIND_MAX_CHARS] or "unknown"


def reasons_count(counts: Mapping[str, int], reason: str) -> dict[str, int]:
    """``counts`` with one more file of ``reason``'s kind."""
    updated = Counter(counts)
    updated[reason_kind(reason)] += 1
    return dict(updated)


@dataclass(frozen=True, slots=True)
class JobFacts:
    """The stored counters an outcome is told from (IndexJob's fields of the same names)."""

    status: str
    message: str = ""
    targeted: bool = False
    # Ended before listing anything, because its source said nothing is new (``Connector.prepare``: a git fetch
    # that found no new commit); ``message`` says what is indexed.
    up_to_date: bool = False
    files_total: int = 0
    files_seen: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_skipped: int = 0
    files_failed: int = 0
    files_deleted: int = 0
    chunks_embedded: int = 0
    chunks_deleted: int = 0
    chunks_undescribed: int = 0
    left_out: Mapping[str, int] | None = None
    skipped_by_reason: Mapping[str, int] | None = None
    failed_by_reason: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    level: Level
    title: str  # "Succeeded", "Up to date", "Nothing to index", "Cancelled", "Failed"
    text: str  # the counts, in words


def job_outcome(facts: JobFacts) -> Outcome | None:
    """What a finished job did; None while it is queued or running."""
    if facts.status == "succeeded":
        return _succeeded(facts)
    if facts.status == "cancelled":
        return Outcome(INFO, "Cancelled", _stopped(facts, facts.message or "cancelled"))
    if facts.status == "failed":
        return Outcome(ERROR, "Failed", _stopped(facts, facts.message or "failed"))
    return None


def _succeeded(facts: JobFacts) -> Outcome:
    if facts.up_to_date:
        return Outcome(SUCCESS, "Up to date", facts.message or "nothing new to index")
    indexed = facts.files_changed + facts.files_unchanged
    parts = [_counted(facts)]
    if facts.files_deleted:
        parts.append(f"{facts.files_deleted:,} removed ({counted(facts.chunks_deleted, 'chunk')})")
    if left_out := left_out_words(facts.left_out):
        parts.append("left out: " + left_out)
    # Counts only: the summary is read by everyone who sees the job, and a reason ("encrypted PDF") is a problem
    # of one file, shown with that file to those who may see its segment (the job page's problems; issue 22).
    if facts.files_skipped:
        parts.append(f"{facts.files_skipped:,} skipped")
    if facts.files_failed:
        parts.append(f"{facts.files_failed:,} failed")
    if facts.chunks_undescribed:
        parts.append(
            f"{counted(facts.chunks_undescribed, 'chunk')} without a contextual description "
            "(the language model failed; the next run tries again)"
        )
    text = "; ".join(parts)
    if indexed:
        return Outcome(SUCCESS, "Succeeded", text)
    if facts.targeted and facts.files_deleted:
        return Outcome(SUCCESS, "Succeeded", text)  # the paths it was about are gone, and so is what they held
    if facts.files_skipped or facts.files_failed:
        why = "every file it found was skipped or failed"
    elif facts.targeted:
        why = "none of the paths it was about is a file to index"
    elif facts.left_out:
        why = "no file in the root matches its patterns"
    else:
        why = "the root holds no files"
    return Outcome(WARNING, "Nothing to index", f"{why}: {text}")


def _counted(facts: JobFacts) -> str:
    indexed = facts.files_changed + facts.files_unchanged
    files = f"{counted(indexed, 'file')} indexed"
    if facts.files_changed and facts.files_unchanged:
        files += f" ({facts.files_changed:,} changed, {facts.files_unchanged:,} unchanged)"
    elif facts.files_unchanged:
        files += " (all unchanged)"
    return f"{files}, {counted(facts.chunks_embedded, 'chunk')} embedded"


def _stopped(facts: JobFacts, why: str) -> str:
    if not facts.files_seen and not facts.files_total:
        return f"{why}, before it read any file"
    done = (
        f"after {facts.files_seen:,} of {counted(facts.files_total, 'file')} "
        f"({counted(facts.chunks_embedded, 'chunk')} embedded)"
    )
    return f"{why} {done}; what was stored stays, and the next job goes on from there"


def left_out_words(left_out: Mapping[str, int] | None) -> str:
    """ "3,456 files not matching the root's patterns, 12 directories excluded by name (exclude_dirs)"."""
    if not left_out:
        return ""
    ordered = sorted(left_out.items(), key=lambda item: (-item[1], item[0]))
    phrases = []
    for reason, n in ordered:
        one, many, why = _LEFT_OUT_WORDS.get(reason, ("", "", reason))
        noun = one if n == 1 else many
        phrases.append(f"{n:,} {noun} {why}" if noun else f"{n:,} {why}")
    return ", ".join(phrases)


def by_kind_words(counts: Mapping[str, int] | None) -> str:
    """ "binary file 10, too large 2": most first."""
    if not counts:
        return ""
    return ", ".join(f"{kind} {n:,}" for kind, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
