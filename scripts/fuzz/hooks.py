"""Schemathesis hooks of scripts/fuzz-api.sh: what the fuzzer must know that a schema cannot say.

Each piece states a rule of docs/PROTOCOL.md (and of the OpenAPI document's prose) that JSON Schema cannot
express, so that the built-in checks judge requests by the whole contract, not by the schemas alone. None of
them turns a check off or drops a failure.

- Cursors (`format: sync-cursor`): a cursor is opaque, and only the empty one and those the server issued are
  valid. Valid ones are made here as the server makes them, at positions no further than the seeded events
  (scripts/fuzz/traffic.py), so always at or below each scope's head.
- `GET /v1/checksum`: `after` at most `through`, and `through` at most the scope's head (rules between two
  parameters, and between a parameter and the server's state). A schema-valid case is brought within them
  (a client asks for a range it knows), so that a 400 for it is still a failure.
- Events (`push_results_follow_the_envelope_rules`, a check of its own): a pushed event of PushedEvent's shape
  that breaks a rule of Event is refused by its result in the 200 (`rejected`, `event.invalid`), not by the
  status; this check holds every 200 of push and sync to that, event by event, both ways. So that it sees
  each rule broken alone, half the generated events get a UUIDv7 id and their replica's clock, as a device
  makes them (a change within PushedEvent's schema: the case stays one the document allows).
"""

import base64
import json
import os
import re

import schemathesis
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

SCOPES = os.environ["FUZZ_SCOPES"].split(",")
SEEDED = int(os.environ["FUZZ_SEEDED_EVENTS"])


def _cursor(positions: dict) -> str:
    text = json.dumps(positions, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(text).decode().rstrip("=")


_scope_names = st.one_of(st.sampled_from(SCOPES), st.from_regex(r"\A[A-Za-z0-9._:-]{1,128}\Z"))
schemathesis.openapi.format(
    "sync-cursor",
    st.one_of(
        st.just(""),
        st.dictionaries(_scope_names, st.integers(0, SEEDED), max_size=4).map(_cursor),
    ),
)


def _is_positive(case) -> bool:
    return case.meta is not None and case.meta.generation.mode.is_positive


def _integer(value):
    """A query integer as generated: an `int`, or its text (the coverage phase writes values as sent)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


_UUID = re.compile(r"\A[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
_HEX16 = re.compile(r"\A[0-9a-fA-F]{16}")


def _made_by_a_device(event) -> None:
    """Half of the generated events (by the last digit of their id) made as a device makes them: a UUIDv7
    id, and the clock of the replica of its dot. Left as generated, nearly every event breaks those two rules
    first, and the others (a dot counter of 0, a stream of 300 bytes, …) would never be seen alone."""
    if not isinstance(event, dict) or not isinstance(event.get("id"), str) or not _UUID.match(event["id"]):
        return
    identifier = event["id"]
    if int(identifier[-1], 16) % 2:
        return
    variant = "89ab"[int(identifier[19], 16) % 4]
    event["id"] = identifier[:14] + "7" + identifier[15:19] + variant + identifier[20:]
    dot = event.get("dot")
    hlc = event.get("hlc")
    if isinstance(dot, dict) and isinstance(dot.get("replica"), str) and _HEX16.match(dot["replica"]):
        if isinstance(hlc, str) and len(hlc) == 38:
            event["hlc"] = hlc[:22] + dot["replica"][:16]


@schemathesis.hook
def map_case(context, case):
    if context.operation is None or not _is_positive(case):
        return case
    if context.operation.path in ("/v1/push", "/v1/sync"):
        if isinstance(case.body, dict) and isinstance(case.body.get("events"), list):
            for event in case.body["events"]:
                _made_by_a_device(event)
        return case
    if context.operation.path != "/v1/checksum":
        return case
    query = case.query
    if not isinstance(query, dict):
        return case
    through = _integer(query.get("through"))
    if through is not None and through > SEEDED:
        through = through % (SEEDED + 1)
        query["through"] = through if isinstance(query["through"], int) else str(through)
    after = _integer(query.get("after"))
    if through is not None and after is not None and after > through:
        query["after"] = through if isinstance(query["after"], int) else str(through)
    return case


_event_validators: dict = {}


def _event_validator(case) -> Draft202012Validator:
    """The document's own `Event` schema: the rules a stored event keeps."""
    raw = case.operation.schema.raw_schema
    key = id(raw)
    if key not in _event_validators:
        schema = {"$ref": "#/components/schemas/Event", "components": raw["components"]}
        _event_validators[key] = Draft202012Validator(schema, format_checker=FormatChecker())
    return _event_validators[key]


def _contains_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(key) or _contains_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_contains_nul(item) for item in value)
    return False


def _envelope_problem(validator: Draft202012Validator, event: dict) -> str | None:
    """Why the event breaks the envelope's rules (Event's schema, and what a schema cannot state), or None."""
    for error in validator.iter_errors(event):
        if list(error.path)[:1] != ["payload"]:
            return f"{'.'.join(str(part) for part in error.path) or 'event'}: {error.message}"
    if len(event["stream"].encode()) > 256:
        return "stream is longer than 256 UTF-8 bytes"
    if len(event["type"].encode()) > 128:
        return "type is longer than 128 UTF-8 bytes"
    if event["hlc"][-16:].lower() != event["dot"]["replica"][:16].lower():
        return "the hlc node is not the first 16 hex digits of dot.replica"
    return None


@schemathesis.check
def push_results_follow_the_envelope_rules(ctx, response, case):
    """One result per pushed event, in order; `event.invalid` exactly for the events that break the rules."""
    if case.operation.path not in ("/v1/push", "/v1/sync") or response.status_code != 200:
        return None
    events = case.body.get("events") if isinstance(case.body, dict) else None
    if not isinstance(events, list):
        return None
    results = json.loads(response.content)["results"]
    assert len(results) == len(events), f"{len(events)} events were pushed and {len(results)} results answered"
    validator = _event_validator(case)
    first: dict = {}
    for index, (event, result) in enumerate(zip(events, results)):
        identifier = event["id"].lower()
        assert result["id"] == identifier, f"result {index} is for {result['id']}, not for event {index}"
        if identifier in first:
            # The same id earlier in the request: that event's result (a duplicate when it was accepted).
            earlier = results[first[identifier]]
            expected = "duplicate" if earlier["status"] == "accepted" else earlier["status"]
            assert result["status"] == expected, f"event {index} repeats an id but is {result['status']}"
            continue
        first[identifier] = index
        invalid = result["status"] == "rejected" and result.get("code") == "event.invalid"
        problem = _envelope_problem(validator, event)
        if problem is not None:
            assert invalid, f"event {index} breaks the envelope's rules ({problem}) but is {result}"
        elif event["scope"] not in SCOPES:
            assert result.get("code") == "scope.forbidden", f"event {index}'s scope is not in the token: {result}"
        elif _contains_nul(event["payload"]):
            assert invalid, f"event {index}'s payload holds U+0000 but is {result}"
        else:
            assert not invalid, f"event {index} keeps the envelope's rules but is {result}"
    return None
