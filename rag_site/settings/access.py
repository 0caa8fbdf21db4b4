"""Identity and access: anonymous search, rate limits, sign-in lockouts."""

from rag_site.settings_registry import read_bool, read_int

# Without credentials the API answers 401. On: anonymous callers may read
# shared sources (those with no bot, client or channel) through the search
# endpoints. Off by default: "shared" means shared among your bots and
# people, not with whoever reaches the port.
RAG_ANONYMOUS_SEARCH = read_bool("RAG_ANONYMOUS_SEARCH")
# Requests per minute per API key or signed-in person (a key can set its own;
# 0 = no limit), and per client address for anonymous callers. Counted in
# Redis, so the budget holds across web workers.
RAG_RATE_LIMIT_PER_MINUTE = read_int("RAG_RATE_LIMIT_PER_MINUTE")
RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE = read_int("RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE")
# Answers 401 or 403 per client address per minute under /api/ and on /mcp
# before that address gets 429 until the minute ends (0 = no limit). A
# misconfigured client makes a few; a key guesser made ~520 a second.
RAG_AUTH_FAILURES_PER_MINUTE = read_int("RAG_AUTH_FAILURES_PER_MINUTE")
# Sign-in (both login pages): failed passwords per account, and per client
# address whatever the account, within the window, before the account or
# address is locked for the lockout (0 = no lock). The lock is checked before
# the password hasher runs; a successful sign-in clears the account's count.
RAG_LOGIN_FAILURES_PER_ACCOUNT = read_int("RAG_LOGIN_FAILURES_PER_ACCOUNT")
RAG_LOGIN_FAILURES_PER_ADDRESS = read_int("RAG_LOGIN_FAILURES_PER_ADDRESS")
RAG_LOGIN_FAILURE_WINDOW_SECONDS = read_int("RAG_LOGIN_FAILURE_WINDOW_SECONDS")
RAG_LOGIN_LOCKOUT_SECONDS = read_int("RAG_LOGIN_LOCKOUT_SECONDS")
# Password checks at once per web process (hashing is slow on purpose, ~0.3 s
# of a core); one more is told to retry in a moment, so a flood of guesses
# from many addresses cannot take every core and web thread from search.
RAG_LOGIN_CONCURRENT_CHECKS = read_int("RAG_LOGIN_CONCURRENT_CHECKS")
# The search page needs a signed-in account.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "search"
LOGOUT_REDIRECT_URL = "login"
