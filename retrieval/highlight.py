"""What the page shows of a hit: a window of whole lines around the first match, rendered, with the
query's words marked the way the lexical channel matched them.

Marks come from PostgreSQL's own stemming: the text's words are split as
the stored search vector splits identifiers (``ChunkSearch.run_query`` ->
"Chunk", "Search", "run", "query"), and a word is marked when one of its
lexemes is one of the query's (``lexical.QUERY_LEXEMES``): one round trip
for every hit on the page. Skills render as markdown (no raw HTML, no
images: nothing loads from elsewhere), files as Pygments-highlighted code,
tools as text.
"""

import functools
import html
import re
from dataclasses import dataclass
from itertools import pairwise

from markdown_it import MarkdownIt
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from kernel.replicas import read_connection
from retrieval.lexical import QUERY_LEXEMES, lexeme_params
from sources.models import IDENTIFIER_CAMEL

WINDOW_LINES = 10  # lines shown per hit; the viewer has the rest
_WORD = re.compile(r"[^\W_]+")  # PostgreSQL's parser splits at underscores too
_CAMEL = re.compile(IDENTIFIER_CAMEL[0])
_TAG = re.compile(r"(<[^>]*>)")
# Pygments' styles: light by default, dark when the system asks for it; both scoped to the code blocks.
_STYLES = (("default", ""), ("monokai", "@media (prefers-color-scheme: dark) {"))
# Raw HTML is escaped, images (a request to anywhere) are not rendered; links keep markdown-it's safe-scheme check.
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).disable("image")


@dataclass(frozen=True, slots=True)
class Snippet:
    html: str  # safe: rendered and escaped here
    start_line: int  # the window's first and last line, in the chunk's own numbering
    end_line: int
    cut: bool  # the chunk has lines beyond the window


def word_parts(text: str) -> list[str]:
    """The words of ``text`` as the stored vector indexes them: camelCase and separators split."""
    return _WORD.findall(_CAMEL.sub(IDENTIFIER_CAMEL[1], text))


def matching_words(query: str, texts: list[str]) -> set[str]:
    """The words (lowercased) of ``texts`` that share a lexeme with ``query``, in one query."""
    words = sorted({word.lower() for text in texts for word in word_parts(text)})
    if not words or not query.strip():
        return set()
    sql = f"""
        WITH query_lexemes AS ({QUERY_LEXEMES})
        SELECT w FROM unnest(%(words)s::text[]) AS w
        WHERE EXISTS (SELECT 1 FROM unnest(tsvector_to_array(to_tsvector('english', w))) AS l
                      WHERE l IN (SELECT lexeme FROM query_lexemes))
    """
    with read_connection().cursor() as cursor:
        cursor.execute(sql, {**lexeme_params(query), "words": words})
        return {row[0] for row in cursor.fetchall()}


def mark_html(rendered: str, words: set[str]) -> str:
    """Wrap the matching words of ``rendered`` HTML's text (never inside tags) in <mark>."""
    if not words:
        return rendered
    pieces = _TAG.split(rendered)
    for index in range(0, len(pieces), 2):  # even pieces are text, odd ones tags
        pieces[index] = _mark_text(pieces[index], words)
    return "".join(pieces)


def _mark_text(text: str, words: set[str]) -> str:
    out, last = [], 0
    for token in re.finditer(r"&\w+;|&#\w+;|[^\W_]+", text):
        if token.group().startswith("&"):
            continue  # an entity, not a word
        for start, end in _camel_spans(token.group()):
            if token.group()[start:end].lower() in words:
                out.append(text[last : token.start() + start])
                out.append(f"<mark>{text[token.start() + start : token.start() + end]}</mark>")
                last = token.start() + end
    out.append(text[last:])
    return "".join(out)


def _camel_spans(token: str) -> list[tuple[int, int]]:
    cuts = [0, *(m.start() + 1 for m in _CAMEL.finditer(token)), len(token)]
    return list(pairwise(cuts))


def lexer_for(path: str):
    """The Pygments lexer for a file's name (plain text when none fits); line numbers stay the file's own."""
    try:
        return get_lexer_for_filename(path, stripnl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False)


def snippet(
    *, content: str, kind: str, path: str, first_line: int, words: set[str], window_lines: int = WINDOW_LINES
) -> Snippet:
    """A window of ``window_lines`` whole lines of a chunk (around its first matching line), rendered and marked."""
    lines = content.split("\n")
    skip = _leading_headings(lines) if kind == "skill" else 0
    first_line += skip
    lines = lines[skip:]
    first_match = next((n for n, line in enumerate(lines) if {w.lower() for w in word_parts(line)} & words), 0)
    # Two lines lead into the match in a full window; a short one (a grouped card's) starts at the match.
    start = max(0, min(first_match - min(2, window_lines // 4), len(lines) - window_lines))
    window = lines[start : start + window_lines]
    text = "\n".join(window)
    if kind == "skill":
        rendered = _MARKDOWN.render(text)
    elif kind == "file":
        lexer = lexer_for(path)
        formatter = HtmlFormatter(nowrap=True)
        numbers = "\n".join(str(first_line + start + n) for n in range(len(window)))
        code = pygments_highlight(text, lexer, formatter).rstrip("\n")
        rendered = (
            f'<div class="code"><pre class="linenos" aria-hidden="true">{numbers}</pre>'
            f'<pre class="highlight"><code>{code}</code></pre></div>'
        )
    else:
        rendered = f'<p class="plain">{html.escape(text)}</p>'
    return Snippet(
        html=mark_html(rendered, words),
        start_line=first_line + start,
        end_line=first_line + start + len(window) - 1,
        cut=len(window) < len(lines),
    )


def _leading_headings(lines: list[str]) -> int:
    """How many lines a skill snippet leaves out at its top: the headings (and blank lines between them) that open
    the chunk, which the hit's title and section trail already name. A chunk of headings only keeps them all."""
    count = 0
    while count < len(lines) and (_HEADING.match(lines[count]) or not lines[count].strip()):
        count += 1
    return count if count < len(lines) else 0


@functools.cache
def highlight_css() -> str:
    """The highlighted code's colours, for a <style> element of the search page and the viewer."""
    parts = []
    for style, media in _STYLES:
        rules = HtmlFormatter(style=style).get_style_defs(".highlight")
        parts.append(f"{media}\n{rules}\n}}" if media else rules)
    return "\n".join(parts)
