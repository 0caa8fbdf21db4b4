"""One client for any OpenAI-compatible API (OpenAI, vLLM, llama.cpp's server, Ollama): chat and embeddings.

Every call follows one policy. A failure is classed (``ErrorKind``): rate
limits, timeouts, lost connections and transient 5xx are retried after a
full-jitter exponential wait (or the server's ``Retry-After``); a model that
still fails, or fails in a way retrying cannot mend, is opened in the shared
circuit breaker (``kernel.breaker``) and the call moves to the next model
of the chain, skipping models already tried or cooling down. A request the
server rejects (other 4xx) is not retried anywhere. When the chain runs out,
``LLMUnavailable`` says why per model; every error here is an ``LLMError``, a
``kernel.errors.Unavailable`` (503 at the API).

Keys and prompts are never logged: warnings name the model, the class of
error and the wait; a provider's error text is scrubbed of the key.
"""

import email.utils
import json
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import httpx

from kernel import metrics
from kernel.breaker import Breaker, ModelStatus
from kernel.config import LLMConfig, llm_config, redis_config
from kernel.errors import Unavailable
from kernel.redis import redis_client

log = logging.getLogger(__name__)

# Transient server errors; other 5xx (501, 505, ...) will not mend by retrying.
TRANSIENT_STATUSES = frozenset({500, 502, 503, 504, 529})
# A provider's error text kept for people: enough for "model not found: x", short of echoing a prompt.
PROVIDER_TEXT_CHARS = 200


class ErrorKind(StrEnum):
    RATE_LIMIT = "rate_limit"  # 429
    TIMEOUT = "timeout"  # no answer in time (or 408)
    CONNECTION = "connection"  # refused, reset, dropped before the whole answer
    SERVER = "server"  # 500, 502, 503, 504, 529
    SERVER_FATAL = "server_fatal"  # other 5xx
    BAD_RESPONSE = "bad_response"  # 2xx that is not the documented JSON
    NOT_FOUND = "not_found"  # 404: this server does not serve the model
    REJECTED = "rejected"  # other 4xx: the request or the key is wrong, for every model alike

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE


_RETRYABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.TIMEOUT, ErrorKind.CONNECTION, ErrorKind.SERVER})


class LLMError(Unavailable):
    """Any failure of the language model layer; callers that can do without the model catch this."""


class LLMNotConfigured(LLMError):
    """No base URL, or no model to call."""


class LLMRejected(LLMError):
    """The server refused the request itself (4xx other than 404 and 429): no retry, no other model."""


class LLMUnavailable(LLMError):
    """Every model of the chain failed or is cooling down; ``details`` has each model's reason."""


class AttemptError(Exception):
    """One failed attempt: its class, a short text for people, and the server's Retry-After."""

    def __init__(self, kind: ErrorKind, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after


def status_kind(status: int) -> ErrorKind:
    """The class of an HTTP error status."""
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status == 408:
        return ErrorKind.TIMEOUT
    if status == 404:
        return ErrorKind.NOT_FOUND
    if status in TRANSIENT_STATUSES:
        return ErrorKind.SERVER
    if status >= 500:
        return ErrorKind.SERVER_FATAL
    return ErrorKind.REJECTED


def retry_after_seconds(headers: httpx.Headers | dict[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date."""
    headers = httpx.Headers(headers)
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_wait(attempt: int, *, base: float, cap: float, jitter: Callable[[], float] = random.random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2^attempt)], so clients that failed together retry apart."""
    return jitter() * min(cap, base * 2**attempt)


class LLMClient:
    """Chat and embeddings over one base URL, with retries, the fallback chain and the shared breaker.

    ``sleep`` and ``jitter`` are injectable so tests never wait; ``breaker``
    defaults to the Redis-backed one every process shares.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        breaker: Breaker | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        http: httpx.Client | None = None,
    ) -> None:
        self.config = config
        self.breaker = breaker or process_breaker()
        self._sleep = sleep
        self._jitter = jitter
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._http = http or httpx.Client(
            base_url=config.base_url.rstrip("/") + "/", headers=headers, timeout=config.timeout
        )

    def with_options(self, **changes: Any) -> "LLMClient":
        """The same connections and breaker with other settings, e.g. ``max_retries=0`` at query time."""
        return LLMClient(
            replace(self.config, **changes),
            breaker=self.breaker,
            sleep=self._sleep,
            jitter=self._jitter,
            http=self._http,
        )

    def close(self) -> None:
        self._http.close()

    def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        models: Sequence[str] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> str:
        """The assistant's text for ``messages`` (``{"role": ..., "content": ...}``), from the first model of the chain
        that answers.

        ``models`` replaces the configured chain (``RAG_LLM_MODEL`` then
        ``RAG_LLM_FALLBACK_MODELS``); ``extra_body`` adds request fields
        (``response_format``, ``seed``, ...). A reply without text is "".
        """
        chain = tuple(models) if models is not None else self.config.chain
        if not chain:
            raise LLMNotConfigured("no language model to call: set RAG_LLM_MODEL")

        def call(model: str) -> str:
            body = {
                **(extra_body or {}),
                "model": model,
                "messages": list(messages),
                "max_tokens": max_tokens,
                "temperature": temperature,
            }
            reply = self._post("chat/completions", body)
            try:
                return reply["choices"][0]["message"].get("content") or ""
            except (KeyError, IndexError, TypeError, AttributeError):
                raise AttemptError(ErrorKind.BAD_RESPONSE, "no choices[0].message in the answer") from None

        log.debug(
            "LLM chat: %d messages, %d characters, max_tokens %d",
            len(messages),
            sum(len(str(m.get("content", ""))) for m in messages),
            max_tokens,
        )
        return self._run(chain, call)

    def rerank(self, query: str, documents: Sequence[str], *, model: str, top_n: int) -> list[tuple[int, float]]:
        """(index, relevance score) of ``documents`` for ``query``, best first, from a rerank endpoint at the
        configured URL itself (Cohere, Jina, Voyage; Hugging Face TEI's bare list too).

        Like ``embed``, one model and no fallback: scores of two models do not compare.
        """
        if not documents:
            return []

        def call(name: str) -> list[tuple[int, float]]:
            body = {"model": name, "query": query, "documents": list(documents), "top_n": top_n}
            return _rerank_results(self._post(self.config.base_url, body), count=len(documents))

        log.debug("rerank: %d documents, model %s", len(documents), model)
        return self._run((model,), call)

    def chat_stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        models: Sequence[str] | None = None,
    ) -> "ChatStream":
        """The assistant's text for ``messages`` as it is written: an open stream of deltas from the first model of
        the chain that starts answering.

        Retries, the fallback chain and the breaker apply until a model starts
        (its HTTP status and headers); a stream that breaks off after that is
        not retried (its words are already out) and raises ``LLMUnavailable``
        while iterating. Close the stream (or leave its ``with`` block) to
        cancel the upstream call.
        """
        chain = tuple(models) if models is not None else self.config.chain
        if not chain:
            raise LLMNotConfigured("no language model to call: set RAG_LLM_MODEL")

        def call(model: str) -> ChatStream:
            body = {
                "model": model,
                "messages": list(messages),
                "max_tokens": max_tokens,
                "temperature": temperature,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            response = self._send("chat/completions", body, stream=True)
            return ChatStream(response, model=model, timeout=self.config.timeout, breaker=self.breaker)

        return self._run(chain, call)

    def embed(self, texts: Sequence[str], *, model: str, dimensions: int | None = None) -> list[list[float]]:
        """One vector per text, in order, from ``model`` only.

        No fallback to another model: vectors of two models do not compare,
        so a failing embedding model is retried, then reported.
        """
        if not texts:
            return []

        def call(name: str) -> list[list[float]]:
            body: dict[str, Any] = {"model": name, "input": list(texts), "encoding_format": "float"}
            if dimensions is not None:
                body["dimensions"] = dimensions
            return _vectors(self._post("embeddings", body), count=len(texts), dimensions=dimensions)

        log.debug("LLM embeddings: %d texts, model %s", len(texts), model)
        return self._run((model,), call)

    # --- the policy ---------------------------------------------------------
    def _run(self, chain: Sequence[str], call: Callable[[str], Any]) -> Any:
        failures: list[dict[str, Any]] = []
        reopen: list[float] = []
        for model in dict.fromkeys(chain):  # a model named twice is tried once
            admission = self.breaker.admit(model, probe_seconds=self.config.timeout + 5)
            if not admission.allowed:
                assert admission.opened_until is not None  # a refused admission always says until when
                metrics.LLM_CALLS.labels(model=model, outcome="cooldown").inc()
                failures.append({"model": model, "error": "cooldown", "opened_until": admission.opened_until})
                reopen.append(admission.opened_until)
                continue
            try:
                result, error, attempts = self._attempts(model, call, tries=1 if admission.probe else None)
            except LLMRejected:
                if admission.probe:
                    self.breaker.close(model)  # it answered: the model is up, the request is what is wrong
                raise
            if error is None:
                if failures:
                    log.warning("LLM call answered by %s after %s", model, _summary(failures))
                return result
            cooldown = max(self.config.cooldown_seconds, error.retry_after or 0.0)
            reopen.append(self.breaker.trip(model, seconds=cooldown, reason=f"{error.kind}: {error.message}"))
            failures.append({"model": model, "error": str(error.kind), "message": error.message, "attempts": attempts})
        retry_after = max(1, round(min(reopen) - self.breaker.now())) if reopen else None
        raise LLMUnavailable(
            f"the language model is unavailable: {_summary(failures)}",
            details={"models": failures, "retry_after_seconds": retry_after},
        )

    def _attempts(self, model: str, call: Callable[[str], Any], *, tries: int | None):
        tries = tries or self.config.max_retries + 1
        for attempt in range(tries):
            started = time.monotonic()
            try:
                result = call(model)
            except AttemptError as error:
                self.breaker.record_error(model, kind=str(error.kind), message=error.message)
                metrics.LLM_CALLS.labels(model=model, outcome=str(error.kind)).inc()
                if error.kind is ErrorKind.REJECTED:
                    raise LLMRejected(
                        f"the language model refused the request ({model}): {error.message}", details={"model": model}
                    ) from None
                wait = self._wait(error, attempt) if error.kind.retryable and attempt + 1 < tries else None
                if wait is None:
                    return None, error, attempt + 1
                log.warning(
                    "LLM %s: %s (attempt %d of %d); retrying in %.1f s", model, error.kind, attempt + 1, tries, wait
                )
                self._sleep(wait)
            else:
                self.breaker.record_success(model, latency_seconds=time.monotonic() - started)
                metrics.LLM_CALLS.labels(model=model, outcome="ok").inc()
                return result, None, attempt + 1
        raise AssertionError("unreachable: the last attempt returns")

    def _wait(self, error: AttemptError, attempt: int) -> float | None:
        if error.retry_after is not None:
            # The server said when: sooner is refused again. Longer than we
            # would wait: skip to the next model (the breaker keeps it away that long).
            return error.retry_after if error.retry_after <= self.config.max_wait else None
        base = (
            self.config.rate_limit_initial_wait
            if error.kind is ErrorKind.RATE_LIMIT
            else self.config.retry_initial_wait
        )
        return backoff_wait(attempt, base=base, cap=self.config.max_wait, jitter=self._jitter)

    # --- the wire -----------------------------------------------------------
    def _post(self, path: str, body: dict) -> Any:
        response = self._send(path, body)
        try:
            return response.json()
        except ValueError:
            raise AttemptError(
                ErrorKind.BAD_RESPONSE, f"HTTP {response.status_code} with a body that is not JSON"
            ) from None

    def _send(self, path: str, body: dict, *, stream: bool = False) -> httpx.Response:
        """POST ``body``; a failure to connect or an error status becomes the attempt's error, whole or streamed."""
        request = self._http.build_request("POST", path, json=body, timeout=self.config.timeout)
        try:
            response = self._http.send(request, stream=stream)
        except httpx.TimeoutException:
            raise AttemptError(ErrorKind.TIMEOUT, f"no answer within {self.config.timeout:g} s") from None
        except httpx.TransportError as exc:
            raise AttemptError(ErrorKind.CONNECTION, f"connection failed: {type(exc).__name__}") from None
        if response.status_code < 400:
            return response
        if stream:
            try:
                response.read()  # the provider's error text, then the connection goes back to the pool
            finally:
                response.close()
        kind = status_kind(response.status_code)
        retry_after = retry_after_seconds(response.headers) if kind.retryable else None
        raise AttemptError(
            kind, f"HTTP {response.status_code} {self._provider_text(response)}".rstrip(), retry_after=retry_after
        )

    def _provider_text(self, response: httpx.Response) -> str:
        try:
            error = response.json().get("error")
            text = error.get("message", "") if isinstance(error, dict) else str(error or "")
        except (ValueError, AttributeError):
            text = ""
        if self.config.api_key:
            text = text.replace(self.config.api_key, "***")
        return text[:PROVIDER_TEXT_CHARS]


@dataclass(frozen=True, slots=True)
class ChatDelta:
    """One piece of a streamed answer: text, or (last) the token usage the server reported."""

    text: str = ""
    usage: dict[str, int] | None = None


class ChatStream:
    """An open streamed chat completion (OpenAI's ``data: {...}`` lines): iterate for ``ChatDelta``s, then close."""

    def __init__(self, response: httpx.Response, *, model: str, timeout: float, breaker: Breaker) -> None:
        self.model = model
        self._response = response
        self._timeout = timeout
        self._breaker = breaker
        self._cancelled = False

    def __enter__(self) -> "ChatStream":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._response.close()

    def cancel(self) -> None:
        """Ends the upstream call from any thread, also one blocked reading it: the socket is shut down (a plain
        close would wait for that read to return), so the server sees the connection close and the reader stops."""
        self._cancelled = True
        stream = self._response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the server or by a finished stream

    def __iter__(self) -> Iterator[ChatDelta]:
        try:
            for line in self._response.iter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, ": comments", "event:" lines
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise self._broken(ErrorKind.BAD_RESPONSE, "a stream line that is not JSON") from None
                if not isinstance(chunk, dict):
                    raise self._broken(ErrorKind.BAD_RESPONSE, "a stream line that is not a JSON object")
                if isinstance(chunk.get("error"), dict):
                    raise self._broken(ErrorKind.SERVER, str(chunk["error"].get("message", ""))[:PROVIDER_TEXT_CHARS])
                for choice in chunk.get("choices") or []:
                    text = ((choice or {}).get("delta") or {}).get("content") or ""
                    if text:
                        yield ChatDelta(text=text)
                if isinstance(chunk.get("usage"), dict):
                    yield ChatDelta(usage={k: v for k, v in chunk["usage"].items() if isinstance(v, int)})
        except (httpx.TransportError, httpx.StreamError) as exc:
            if self._cancelled or self._response.is_closed:
                return  # ended on purpose (the caller cancelled): nothing broke
            if isinstance(exc, httpx.TimeoutException):
                raise self._broken(ErrorKind.TIMEOUT, f"silent for more than {self._timeout:g} s") from None
            raise self._broken(ErrorKind.CONNECTION, f"the stream broke off: {type(exc).__name__}") from None

    def _broken(self, kind: ErrorKind, message: str) -> "LLMUnavailable":
        self._breaker.record_error(self.model, kind=str(kind), message=message)
        return LLMUnavailable(
            f"the language model stopped answering ({self.model}): {kind}: {message}",
            details={"models": [{"model": self.model, "error": str(kind), "message": message}]},
        )


def _vectors(reply: Any, *, count: int, dimensions: int | None) -> list[list[float]]:
    try:
        items = sorted(reply["data"], key=lambda item: item["index"])
        vectors = [[float(x) for x in item["embedding"]] for item in items]
    except (KeyError, TypeError, ValueError):
        raise AttemptError(ErrorKind.BAD_RESPONSE, "no data[].embedding lists in the answer") from None
    if len(vectors) != count:
        raise AttemptError(ErrorKind.BAD_RESPONSE, f"{len(vectors)} vectors for {count} texts")
    sizes = {len(v) for v in vectors}
    if len(sizes) != 1 or (dimensions is not None and sizes != {dimensions}):
        raise AttemptError(
            ErrorKind.BAD_RESPONSE, f"vectors of {sorted(sizes)} dimensions, asked for {dimensions or 'one size'}"
        )
    return vectors


def _rerank_results(reply: Any, *, count: int) -> list[tuple[int, float]]:
    """``{"results": [{"index", "relevance_score"}]}`` (Cohere, Jina, Voyage's ``data``) or TEI's bare
    ``[{"index", "score"}]``, as (index, score) best first; anything else is a bad response."""
    items: Any = reply.get("results", reply.get("data")) if isinstance(reply, dict) else reply
    try:
        pairs = [(item["index"], item.get("relevance_score", item.get("score"))) for item in items]
        results = [(int(index), float(score)) for index, score in pairs if isinstance(index, int)]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise AttemptError(ErrorKind.BAD_RESPONSE, "no results[].index and relevance_score in the answer") from None
    if len(results) != len(pairs) or any(not 0 <= index < count for index, _ in results):
        raise AttemptError(ErrorKind.BAD_RESPONSE, f"result indexes outside the {count} documents sent")
    return sorted(results, key=lambda pair: -pair[1])


def _summary(failures: list[dict[str, Any]]) -> str:
    parts = []
    for failure in failures:
        if failure["error"] == "cooldown":
            parts.append(f"{failure['model']} cooling down")
        else:
            parts.append(f"{failure['model']} {failure['error']} after {failure['attempts']} attempt(s)")
    return "; ".join(parts)


# --- per process ------------------------------------------------------------
_clients: dict[tuple[int, LLMConfig], LLMClient] = {}
_clients_lock = threading.Lock()
_breaker: Breaker | None = None
_breaker_lock = threading.Lock()


def process_breaker() -> Breaker:
    """The breaker every client of this process shares, in the broker's Redis (its own state too, while Redis is
    away)."""
    global _breaker
    with _breaker_lock:
        if _breaker is None:
            _breaker = Breaker(redis_client=lambda: redis_client(redis_config()))
        return _breaker


def llm_configured(config: LLMConfig | None = None) -> bool:
    return bool((config or llm_config()).base_url)


def llm_client(config: LLMConfig | None = None) -> LLMClient:
    """This process's client for ``config`` (default: the settings'; a new one after a fork or a settings change)."""
    config = config or llm_config()
    if not config.base_url:
        raise LLMNotConfigured("no language model is configured: set RAG_LLM_BASE_URL")
    key = (os.getpid(), config)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            _clients.clear()  # another configuration's, or the parent's before a fork
            client = _clients[key] = LLMClient(config)
    return client


_rerank_clients: dict[tuple[int, LLMConfig], LLMClient] = {}


def rerank_client(config: LLMConfig) -> LLMClient:
    """This process's client for a rerank service (``config.base_url``: its endpoint's full URL), apart from the
    chat model's so the two never replace each other's connections; the breaker is the one they share."""
    key = (os.getpid(), config)
    with _clients_lock:
        client = _rerank_clients.get(key)
        if client is None:
            _rerank_clients.clear()  # another configuration's, or the parent's before a fork
            client = _rerank_clients[key] = LLMClient(config)
    return client


def llm_chat(
    *,
    messages: Sequence[dict[str, str]],
    max_tokens: int,
    temperature: float = 0.0,
    config: LLMConfig | None = None,
) -> str:
    """The chain's answer to ``messages``; raises ``LLMError`` when no model can give one."""
    return llm_client(config).chat(messages, max_tokens=max_tokens, temperature=temperature)


def llm_embed(
    *, texts: Sequence[str], model: str, dimensions: int | None = None, config: LLMConfig | None = None
) -> list[list[float]]:
    """Vectors of ``texts`` from ``model`` at the configured base URL; raises ``LLMError`` on failure."""
    return llm_client(config).embed(texts, model=model, dimensions=dimensions)


def llm_status(config: LLMConfig | None = None) -> list[ModelStatus]:
    """Breaker state and recent health of the configured models, then of any other model called lately."""
    return process_breaker().status((config or llm_config()).chain)
