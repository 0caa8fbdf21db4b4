"""A seeded, bounded property-based run of the whole API against its own OpenAPI schema, on a real server.

Schemathesis generates requests from /api/openapi.json (valid ones, and
invalid ones that must be refused with a 4xx), sends them over HTTP to the
live server (real PostgreSQL, Redis and embedding model) and checks every
answer: never a 5xx, a documented status code and content type, a body that
matches the documented schema.
"""

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.generation.meta import CoverageScenario, coverage_scenario
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from access.keys import api_key_create
from sources import services
from tests.factories import SkillFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EXAMPLES_PER_OPERATION_AND_MODE = 25
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_fuzzing_the_api_finds_no_server_error_and_no_schema_violation(live_server, settings, openai_server):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    # A chat model (the fake one on loopback), so POST /api/v1/answer is fuzzed as it runs, streaming included.
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "writer"
    services.skill_index(
        skill_id=SkillFactory(slug="deploy", body="# Deploy\n\n## Backups\n\nRun pg_dump nightly.\n").pk
    )
    _, key = api_key_create(name="fuzzer", can_manage=True)
    schema = schemathesis.openapi.from_url(live_server.url + "/api/openapi.json")
    cases: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    failures: list[str] = []

    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            checks = CHECKS + ([negative_data_rejection] if mode == GenerationMode.NEGATIVE else [])

            @hypothesis_settings(
                max_examples=EXAMPLES_PER_OPERATION_AND_MODE,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def exercise(case, operation, mode, checks) -> None:
                response = case.call(base_url=live_server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
                cases[f"{operation.label} {mode.value}"] += 1
                statuses[response.status_code] += 1
                # A probe with a method the schema does not declare (GET on a POST-only path) belongs to no
                # operation: its answer is a 405 naming the allowed methods, not one of the operation's statuses.
                # Schemathesis sends it once the body schema can be broken on its own (bodies forbid extra fields).
                probe = coverage_scenario(case) == CoverageScenario.UNSPECIFIED_HTTP_METHOD
                applied = [not_a_server_error, unsupported_method] if probe else checks
                try:
                    case.validate_response(response, checks=applied)
                except Exception as exc:  # noqa: BLE001 - collect every failure, report them together
                    failures.append(f"{operation.label} [{mode.value}] -> {response.status_code}: {str(exc)[:400]}")

            # This iteration's values as arguments: the function closes over nothing that the loop rebinds.
            try:
                exercise(operation=operation, mode=mode, checks=checks)
            except Unsatisfiable:
                # No parameters, no body and credentials optional (/health): there is no invalid request to make.
                if mode != GenerationMode.NEGATIVE or operation.label != "GET /api/v1/health":
                    raise

    total = sum(cases.values())
    print(
        f"\nfuzzed {total} cases over {len(cases)} operation/mode pairs; "
        f"status codes {dict(sorted(statuses.items()))}; "
        f"{sum(n for s, n in statuses.items() if s >= 500)} server errors; {len(failures)} check failures"
    )
    assert total >= 200, cases
    assert not failures, "\n".join(failures[:20])
