"""Hostile bodies at POST /api/v1/telemetry/, on both paths: the DRF view and the lean ASGI path
agents take. Each is refused with a 4xx naming the field or the problem, and nothing is written
(no buffered batch, no sample). Duplicated keys follow the one rule: the last wins."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from apps.telemetry.models import IngestBatch, ModuleSample, NodeSample
from tests.security.hostile import MB, NESTED, duplicate_key, encode, replace_value
from tests.telemetry.conftest import Fleet, node_sample, stored
from tests.telemetry.test_ingest_asgi import AsgiClient

URL = "/api/v1/telemetry/"
pytestmark = pytest.mark.django_db(transaction=True)

Post = Callable[[bytes], tuple[int, dict[str, Any]]]


@pytest.fixture
def fleet(transactional_db: Any) -> Fleet:
    return Fleet()


@pytest.fixture(params=["view", "asgi"])
def post(request: Any, fleet: Fleet) -> Iterator[Post]:
    """POST a raw body with node n-a's agent key, through the DRF view or the lean ASGI path."""
    if request.param == "view":
        def via_view(body: bytes) -> tuple[int, dict[str, Any]]:
            r = fleet.client(fleet.key_a).post(URL, body, content_type="application/json")
            return r.status_code, r.json()
        yield via_view
        return
    client = AsgiClient()

    def via_asgi(body: bytes) -> tuple[int, dict[str, Any]]:
        r = client.post(body, key=fleet.key_a)
        return r.status_code, r.json()
    try:
        yield via_asgi
    finally:
        client.close()


def valid(**over: Any) -> bytes:
    sample = node_sample("n-a", serials=["A-0", "A-1"])
    sample.update(over)
    return encode({"batch_id": "hostile-0001", "contract": 2, "node_samples": [sample]})


def refused(post: Post, body: bytes, status: int = 400) -> dict[str, Any]:
    code, data = post(body)
    assert code == status, data
    assert not IngestBatch.objects.exists()
    stored()
    assert not NodeSample.objects.exists() and not ModuleSample.objects.exists()
    return data


def errors(data: dict[str, Any]) -> dict[str, list[str]]:
    return data.get("errors", {})


def test_the_valid_body_is_taken(post: Post) -> None:
    """The bodies below are this one, spoiled: the baseline is accepted."""
    code, data = post(valid())
    assert code == 202, data
    stored()
    assert NodeSample.objects.count() == 1 and ModuleSample.objects.count() == 2


def test_truncated_json(post: Post) -> None:
    body = valid()
    data = refused(post, body[: len(body) // 2])
    assert "the body is not valid JSON" in data["detail"]


def test_nested_ten_thousand_deep(post: Post) -> None:
    data = refused(post, NESTED)
    assert "nested too deeply" in data["detail"]


def test_nested_ten_thousand_deep_inside_a_field(post: Post) -> None:
    data = refused(post, replace_value(valid(), "modules", NESTED))
    assert "nested too deeply" in data["detail"]


def test_ten_megabytes_of_whitespace(post: Post) -> None:
    assert settings.MAX_BODY_BYTES < 10 * MB
    data = refused(post, b" " * (10 * MB), status=413)
    assert f"exceeds the limit of {settings.MAX_BODY_BYTES} bytes" in data["detail"]


def test_whitespace_under_the_body_limit(post: Post) -> None:
    data = refused(post, b" \n\t\r" * MB)
    assert "the body is not valid JSON" in data["detail"]


def test_invalid_utf8(post: Post) -> None:
    data = refused(post, valid().replace(b'"n-a"', b'"n-\xff\xfe"'))
    assert "not valid UTF-8" in data["detail"]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_literals(post: Post, literal: bytes) -> None:
    data = refused(post, replace_value(valid(), "cpu_util", literal))
    assert "the body is not valid JSON" in data["detail"]


def test_a_number_past_a_double_names_its_field(post: Post) -> None:
    data = refused(post, replace_value(valid(), "load1", b"1e999"))
    assert errors(data) == {"node_samples[0].load1": ["must be a finite number"]}


def test_duplicated_keys_the_last_wins(post: Post) -> None:
    code, data = post(duplicate_key(valid(), "cpu_util", b"7", b"0.25"))
    assert code == 202, data
    stored()
    assert list(NodeSample.objects.values_list("cpu_util", flat=True)) == [0.25]


def test_duplicated_keys_the_last_is_the_one_checked(post: Post) -> None:
    data = refused(post, duplicate_key(valid(), "cpu_util", b"0.25", b"7"))
    assert errors(data) == {"node_samples[0].cpu_util": ["must be at most 1"]}


def test_a_time_far_in_the_past(post: Post) -> None:
    data = refused(post, valid(time="1970-01-01T00:00:00Z"))
    assert list(errors(data)) == ["node_samples[0].time"]
    assert "older than the raw retention" in errors(data)["node_samples[0].time"][0]


def test_a_time_before_year_one_in_utc(post: Post) -> None:
    data = refused(post, valid(time="0001-01-01T00:00:00+01:00"))
    assert errors(data) == {"node_samples[0].time": ["is out of range: in UTC it falls outside the years 1-9999"]}


def test_a_time_far_in_the_future(post: Post) -> None:
    data = refused(post, valid(time="9999-12-31T23:59:59Z"))
    assert list(errors(data)) == ["node_samples[0].time"]
    assert "in the future (at most 30 s allowed)" in errors(data)["node_samples[0].time"][0]


def test_a_time_after_year_9999_in_utc(post: Post) -> None:
    data = refused(post, valid(time="9999-12-31T23:59:59-01:00"))
    assert errors(data) == {"node_samples[0].time": ["is out of range: in UTC it falls outside the years 1-9999"]}


def test_a_time_a_minute_ahead(post: Post) -> None:
    soon = (timezone.now() + dt.timedelta(minutes=1)).isoformat()
    data = refused(post, valid(time=soon))
    assert list(errors(data)) == ["node_samples[0].time"]


def test_a_module_serial_of_another_node(post: Post) -> None:
    body = encode({"batch_id": "hostile-0001", "contract": 2,
                   "node_samples": [node_sample("n-a", serials=["A-0", "B-0"])]})
    data = refused(post, body, status=403)
    assert errors(data) == {"node_samples[0].modules[1].serial": ["module B-0 is in n-b, not in n-a"]}


def test_another_nodes_hostname(post: Post) -> None:
    data = refused(post, valid(node="n-b"), status=403)
    assert errors(data) == {"node_samples[0].node": ["this key belongs to n-a, not n-b"]}


def test_a_counter_past_64_bits(post: Post) -> None:
    data = refused(post, replace_value(valid(), "ecc_corrected", str(2**64).encode()))
    assert errors(data) == {"node_samples[0].modules[0].ecc_corrected": [f"must be at most {2**63 - 1}"]}


def test_a_count_past_64_bits(post: Post) -> None:
    data = refused(post, replace_value(valid(), "threads", str(10**30).encode()))
    assert errors(data) == {"node_samples[0].threads": [f"must be at most {2**31 - 1}"]}


def test_an_integer_past_a_double_in_a_float_field(post: Post) -> None:
    data = refused(post, replace_value(valid(), "cpu_util", str(10**400).encode()))
    assert errors(data) == {"node_samples[0].cpu_util": ["must be a finite number"]}


def test_a_contract_version_past_64_bits(post: Post) -> None:
    data = refused(post, replace_value(valid(), "contract", str(2**70).encode()))
    assert list(errors(data)) == ["contract"]
