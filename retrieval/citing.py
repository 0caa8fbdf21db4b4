"""Citation markers in a model's answer, read while it streams, and the check that numbers are cited.

Pure functions over text (retrieval/answering.py feeds them). A marker is
``[n]`` or ``[n, m]`` naming numbered sources; the model writes it in
pieces (``[``, ``1``, ``2]``), so the reader holds back a possible marker
until it closes or proves to be plain text. A number that names no source is
removed from the text and counted: a citation that points nowhere is worse
than none, because a reader trusts it.
"""

import re
from dataclasses import dataclass, field

# Longest marker held back: "[12, 13, 14]" fits; anything longer is text (a list, a link, code).
MARKER_MAX_CHARS = 24
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_MARKER_PREFIX = re.compile(r"\[[\d,\s]*")
# Within a line, a sentence ends at . ! ? followed by space; markers after the stop belong to the sentence before
# ("The limit is 5 GB. [1]"), so a break is not taken before "[digit".
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?!\[\d)")
# A list item's own number ("1. ", "2) ") is layout, not a claim.
_LIST_NUMBER = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+")
_DIGIT = re.compile(r"\d")


@dataclass
class MarkerReader:
    """Reads an answer delta by delta: ``feed`` returns the text safe to show (markers naming a source kept,
    others removed), ``flush`` what was held back at the end."""

    sources: int  # valid markers are 1..sources
    cited: list[int] = field(default_factory=list)  # in order of first use
    dropped: int = 0  # numbers that named no source
    _held: str = ""

    def feed(self, delta: str) -> str:
        text, out = self._held + delta, []
        self._held = ""
        at = 0
        while at < len(text):
            start = text.find("[", at)
            if start < 0:
                out.append(text[at:])
                break
            out.append(text[at:start])
            match = _MARKER.match(text, start)
            if match:
                out.append(self._marker(match.group(1)))
                at = match.end()
                continue
            prefix = _MARKER_PREFIX.match(text, start)
            assert prefix is not None  # "[" alone matches
            if prefix.end() == len(text) and len(text) - start < MARKER_MAX_CHARS:
                self._held = text[start:]  # may still close as a marker: wait for the next delta
                break
            out.append("[")  # not a marker: plain text
            at = start + 1
        return "".join(out)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def _marker(self, numbers: str) -> str:
        kept = []
        for piece in numbers.split(","):
            number = int(piece)
            if 1 <= number <= self.sources:
                kept.append(number)
                if number not in self.cited:
                    self.cited.append(number)
            else:
                self.dropped += 1
        return "".join(f"[{n}]" for n in kept)


def uncited_numeric_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that state a number (a digit outside citation markers) and cite no source.

    Numbers are what answers most often get wrong (a limit, a version, a
    date); each one must point at the passage a reader can check it against.
    """
    found = []
    for line in text.splitlines():
        for sentence in _SENTENCE_BREAK.split(_LIST_NUMBER.sub("", line, count=1)):
            sentence = sentence.strip()
            if sentence and _DIGIT.search(_MARKER.sub("", sentence)) and not _MARKER.search(sentence):
                found.append(sentence)
    return found
