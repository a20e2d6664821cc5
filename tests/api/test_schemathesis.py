"""schemathesis walks the live server's /openapi.json: for every operation, positive and
negative cases with every built-in check (no 5xx; status codes, content types, headers and
bodies as documented; negative data rejected with a 4xx; valid data accepted). Bounded: about
25 examples per operation (13 per mode), no shrinking, no example database: ~50 s here.

(The strategies are driven with Hypothesis directly: schemathesis's lazy `from_fixture` loader
reads a pytest node attribute that pytest 9 no longer has.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance  # registers them all

from api.app import create_app
from api.settings import Settings
from tests.api.conftest import Server

MAX_EXAMPLES = 13  # per operation and mode
DEADLINE = timedelta(seconds=10)  # per example: generous on a loaded 2-core machine

# Checks that cannot hold for an operation, and why.
EXCLUDED = {
    # "schema-valid data is accepted": any string is a schema-valid `sql`, but `SELECT` is
    # valid SQL and `0` is not; JSON Schema cannot say which, so a 422 here is right.
    "/v1/sql": [positive_data_acceptance],
    # the same: any string is a schema-valid `dataset`, `wine` names a problem and `x` none;
    # any map is schema-valid `features`, the pack's model reads some names; any bytes are a
    # schema-valid `file`, a CSV with the `target` column is a table
    "/v1/proposals": [positive_data_acceptance],
    # likewise any object is a schema-valid `ir`; only a valid canonical IR is accepted
    "/v1/rewrites": [positive_data_acceptance],
}

# A string longer than `sql`'s maxLength may also be larger than the body limit: then the
# rejection is a 413 (the body is refused before it is parsed), which is as right as a 422.
CONFIG = schemathesis.Config.from_dict({"checks": {"negative_data_rejection": {
    "expected-statuses": [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429, "5xx"]}}})

# The Arrow steps route's body is binary: sent as the bytes generated (any bytes are a
# schema-valid body; the route answers 401 without a key, 422 for bytes that are not Arrow).
schemathesis.serializer.alias("application/vnd.apache.arrow.stream",
                              "application/octet-stream")

# The operations, from the app itself (no server needed to collect the tests), each with
# the modes it has data for: an operation with no inputs has no negative cases.
POSITIVE, NEGATIVE = schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE
DOC = create_app(Settings()).openapi()
OPERATIONS = [(path, method) for path, ops in DOC["paths"].items() for method in ops]
CASES = [(path, method, mode)
         for path, ops in DOC["paths"].items()
         for method, op in ops.items()
         for mode in ([POSITIVE, NEGATIVE] if op.get("parameters") or op.get("requestBody")
                      else [POSITIVE])]


@pytest.fixture(scope="session")
def live_schema(server: Server) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", timeout=30,
                                           config=CONFIG)
    schema.config.update(base_url=server.url)
    return schema


def test_the_live_schema_has_these_operations(live_schema: schemathesis.BaseSchema) -> None:
    live = {(op.ok().path, op.ok().method.lower()) for op in live_schema.get_all_operations()}
    assert live == set(OPERATIONS)


@pytest.mark.parametrize("path,method,mode", CASES)
def test_openapi_contract(live_schema: schemathesis.BaseSchema, path: str, method: str,
                          mode: schemathesis.GenerationMode) -> None:
    operation = live_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=DEADLINE, database=None,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(excluded_checks=EXCLUDED.get(path, []))

    run()
