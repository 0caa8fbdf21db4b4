"""Websites: a crawler of one site's pages under a start URL, with no database access.

``crawl.crawl`` yields one ``Page`` per URL for the indexing pipeline; the rest are its parts, one idea each:
``scope`` (which URLs), ``addresses`` (which hosts may be reached), ``fetch`` (one GET), ``robots``, ``sitemap``
and ``links``.
"""

from sources.connectors.web.crawl import CrawlLimits, CrawlRefused, Page, Validators, crawl, web_url_problem

__all__ = ["CrawlLimits", "CrawlRefused", "Page", "Validators", "crawl", "web_url_problem"]
