"""The judge model's shutdown date: what a provider's models endpoint answer means, how it weighs
against the policy's pin, and on which day a release lane blocks (the clock is an argument)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from gate.decide.retirement import retiring_finding
from gate.judge.models_endpoint import model_url, read_answer
from gate.model.policy import Evaluator, Lane
from gate.model.retirement import NOT_ASKED, ProviderAnswer, Retirement, recorded, resolve

DAY = dt.date(2026, 12, 7)
SHUTDOWN = dt.date(2027, 1, 14)


def body(data: object) -> bytes:
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("status", "reply", "kind", "date"),
    [
        (200, {"id": "gpt-4o-mini", "object": "model", "shutdown_date": "2027-01-14"}, "date", SHUTDOWN),
        (200, {"id": "gpt-4o-mini", "object": "model", "shutdown_date": None}, "none", None),
        (200, {"id": "gpt-4o-mini", "object": "model"}, "unknown", None),  # a provider without the field
        (200, {"shutdown_date": "14/01/2027"}, "unknown", None),
        (200, {"shutdown_date": "2027-02-30"}, "unknown", None),
        (200, {"shutdown_date": 20270114}, "unknown", None),
        (200, ["not", "an", "object"], "unknown", None),
        # OpenAI, for a model it does not serve
        (404, {"error": {"message": "The model `x` does not exist", "code": "model_not_found"}}, "not_found", None),
        # llama.cpp's server: no per-model endpoint
        (404, {"error": {"message": "File Not Found", "type": "not_found_error", "code": 404}}, "unknown", None),
        (401, {"error": {"message": "Invalid API Key"}}, "unknown", None),
        (500, {}, "unknown", None),
    ],
)
def test_the_models_endpoint_answer_is_a_date_none_or_unknown_never_an_error(
    status: int, reply: object, kind: str, date: dt.date | None
) -> None:
    answer = read_answer(status, body(reply))
    assert (answer.kind, answer.date) == (kind, date)


def test_a_reply_that_is_not_json_is_unknown() -> None:
    assert read_answer(200, b"<html>").kind == "unknown"
    assert read_answer(404, b"").kind == "unknown"


def test_the_model_name_is_one_path_segment() -> None:
    assert model_url("https://api.openai.com/v1/", "gpt-4o-mini") == "https://api.openai.com/v1/models/gpt-4o-mini"
    assert model_url("http://h/v1", "ft:gpt-4o-mini:org::abc") == "http://h/v1/models/ft:gpt-4o-mini:org::abc"
    assert model_url("http://h/v1", "a/b?c") == "http://h/v1/models/a%2Fb%3Fc"


def test_the_providers_date_wins_and_a_disagreement_is_a_note() -> None:
    got = resolve("m", ProviderAnswer("date", SHUTDOWN), dt.date(2027, 2, 1))
    assert (got.date, got.source) == (SHUTDOWN, "provider")
    assert got.notes and "2027-02-01" in got.notes[0]
    assert resolve("m", ProviderAnswer("date", SHUTDOWN), SHUTDOWN).notes == ()


def test_the_pin_counts_where_the_provider_gives_no_date() -> None:
    for answer in (NOT_ASKED, ProviderAnswer("unknown", detail="HTTP 404"), ProviderAnswer("none")):
        got = resolve("m", answer, SHUTDOWN)
        assert (got.date, got.source) == (SHUTDOWN, "policy")
    assert resolve("m", ProviderAnswer("none"), None) == Retirement("m", None, "provider")
    assert resolve("m", NOT_ASKED, None) == Retirement("m")
    assert "404 model_not_found" in resolve("m", ProviderAnswer("not_found"), None).notes[0]


def test_the_lineage_reads_back_what_it_wrote() -> None:
    for retirement in (Retirement("m", SHUTDOWN, "provider"), Retirement("m", None, "provider")):
        fields = retirement.lineage()
        assert recorded("m", fields["judge_shutdown_date"], fields["judge_shutdown_source"]) == retirement
    assert Retirement("m").lineage() == {}
    assert recorded("m", "not-a-date", "provider") is None
    assert recorded("m", "2027-01-14", "someone") is None


@pytest.mark.parametrize(
    ("days_before", "blocks"),
    [(15, False), (14, True), (7, True), (1, True), (0, True), (-3, True)],
)
def test_a_release_lane_blocks_from_the_policys_days_before(days_before: int, blocks: bool) -> None:
    evaluator = Evaluator(model="m")
    retirement = Retirement("m", DAY + dt.timedelta(days=days_before), "provider")
    release = Lane(partitions=["held_out"])
    found = retiring_finding(retirement, release, evaluator, DAY)
    assert (found is not None) == blocks
    if found is not None:
        assert found.kind == "judge_retiring" and found.state.value == "review_required"
    assert retiring_finding(retirement, Lane(partitions=["sentinel"]), evaluator, DAY) is None  # a pr lane warns only


def test_what_a_release_lane_is() -> None:
    assert Lane(partitions=["held_out"]).is_release
    assert Lane(partitions=["product"], product=True).is_release
    assert not Lane(partitions=["sentinel"]).is_release
    assert Lane(partitions=["sentinel"], release=True).is_release
    assert not Lane(partitions=["held_out"], release=False).is_release


def test_zero_days_never_blocks_before_the_day() -> None:
    evaluator = Evaluator(model="m", retirement_blocks_within_days=0)
    lane = Lane(partitions=["held_out"])
    assert retiring_finding(Retirement("m", DAY + dt.timedelta(days=1), "policy"), lane, evaluator, DAY) is None
    assert retiring_finding(Retirement("m", DAY, "policy"), lane, evaluator, DAY) is not None
