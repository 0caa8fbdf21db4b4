"""A site's robots.txt, read the way RFC 9309 asks of an unreachable or missing one.

urllib.robotparser does the matching (first matching rule of the group for our user agent; no ``*`` or ``$``
patterns). The crawl fetches the file itself, through its checked connection, and hands the answer here.
"""

from dataclasses import dataclass, field
from urllib.robotparser import RobotFileParser

from sources.connectors.web.links import decode

# RFC 9309 2.5: crawlers must parse at least 500 KiB; the rest of a larger file is ignored.
MAX_ROBOTS_BYTES = 500 * 1024

DISALLOWED = "disallowed by robots.txt"


@dataclass(frozen=True, slots=True)
class Robots:
    """What robots.txt lets ``user_agent`` fetch, and the sitemaps it declares."""

    user_agent: str
    parser: RobotFileParser | None = None  # None: everything or nothing, as allow_all says
    allow_all: bool = True
    reason: str = DISALLOWED  # why a URL is refused, for the skipped page
    sitemaps: tuple[str, ...] = field(default=())

    @property
    def delay(self) -> float:
        """Seconds to wait between requests (Crawl-delay, or Request-rate's interval); 0 when robots.txt asks none."""
        if self.parser is None:
            return 0.0
        rate = self.parser.request_rate(self.user_agent)
        by_rate = rate.seconds / rate.requests if rate is not None and rate.requests else 0.0
        return float(max(self.parser.crawl_delay(self.user_agent) or 0, by_rate))

    def allows(self, url: str) -> bool:
        if self.parser is None:
            return self.allow_all
        return self.parser.can_fetch(self.user_agent, url)


def robots_from_response(*, status: int, body: bytes, user_agent: str, problem: str = "") -> Robots:
    """The rules a response to ``GET /robots.txt`` sets (status 0: no response at all, ``problem`` says why).

    - 2xx: the file's rules.
    - 401 and 403: nothing may be fetched (urllib.robotparser's reading; RFC 9309 would allow all, but a site
      that locks its robots.txt away is not asking to be crawled).
    - other 4xx (404: no robots.txt), or a redirect the crawl may not follow (RFC 9309 2.3.1.2): everything.
    - 5xx, or no answer: nothing, this crawl (RFC 9309 2.3.1.4: an unreachable robots.txt means complete disallow).
    """
    if 200 <= status < 300:
        parser = RobotFileParser()
        parser.parse(decode(body[:MAX_ROBOTS_BYTES], "utf-8").splitlines())
        return Robots(user_agent=user_agent, parser=parser, sitemaps=tuple(parser.site_maps() or ()))
    if status in (401, 403):
        return Robots(user_agent=user_agent, allow_all=False, reason=f"robots.txt is forbidden (HTTP {status})")
    if 300 <= status < 500:
        return Robots(user_agent=user_agent)
    said = f"HTTP {status}" if status else (problem or "no answer")
    return Robots(user_agent=user_agent, allow_all=False, reason=f"robots.txt unavailable ({said}): nothing fetched")
