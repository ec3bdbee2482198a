"""Requests in flight read from the serving process: a Prometheus endpoint summed over
labels, a command's output, or explicitly nothing; unknown is None, never 0."""

from __future__ import annotations

import logging

import pytest

from agent.cp_agent.inflight import CommandInFlight, NoInFlight, PrometheusInFlight, make_in_flight
from tests.agent.promserver import PromServer, in_flight_gauge

VLLM = """# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="qwen2.5-7b-instruct"} 4.0
vllm:num_requests_running{model_name="llama-3.2-1b"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="qwen2.5-7b-instruct"} 2.0
vllm:num_requests_waiting{model_name="llama-3.2-1b"} 0.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="qwen2.5-7b-instruct"} 98765.0
"""


def test_it_sums_a_triton_gauge_over_its_label_sets(prom_server: PromServer) -> None:
    prom_server.serve(in_flight_gauge({"intent-1b": 2, "generation-7b": 1}))
    source = make_in_flight(f"prometheus:{prom_server.url}#nv_inference_pending_request_count")
    assert isinstance(source, PrometheusInFlight)
    assert source.read() == 3
    prom_server.serve(in_flight_gauge({"intent-1b": 0, "generation-7b": 0}))
    assert source.read() == 0
    source.close()


def test_it_sums_several_vllm_metrics(prom_server: PromServer) -> None:
    prom_server.serve(VLLM)
    source = make_in_flight(f"prometheus:{prom_server.url}#vllm:num_requests_running, vllm:num_requests_waiting")
    assert source.read() == 7
    source.close()


def test_it_reports_unknown_when_a_named_metric_is_absent_and_says_so_once(
        prom_server: PromServer, caplog: pytest.LogCaptureFixture) -> None:
    prom_server.serve(VLLM)
    source = make_in_flight(f"prometheus:{prom_server.url}#vllm:num_requests_running,vllm:num_requests_swapped")
    with caplog.at_level(logging.WARNING, logger="cp_agent.inflight"):
        assert [source.read() for _ in range(3)] == [None, None, None]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "no metric named vllm:num_requests_swapped" in said[0]
    source.close()


def test_it_reports_unknown_while_the_endpoint_is_down_then_recovers(
        prom_server: PromServer, caplog: pytest.LogCaptureFixture) -> None:
    source = make_in_flight(f"prometheus:{prom_server.url}#nv_inference_pending_request_count")
    with caplog.at_level(logging.WARNING, logger="cp_agent.inflight"):
        prom_server.serve("", status=503)
        assert source.read() is None and source.read() is None
        prom_server.serve("this is { not prometheus text")
        assert source.read() is None
        prom_server.serve(in_flight_gauge({"m": 5}))
        assert source.read() == 5
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "503" in said[0] and "works again (5 in flight)" in said[1]
    source.close()


def test_it_knows_a_declared_gauge_without_series_as_zero(prom_server: PromServer) -> None:
    # Triton declares the family before any model has a pending request: known, and nothing pending.
    prom_server.serve("# HELP nv_inference_pending_request_count Pending.\n"
                      "# TYPE nv_inference_pending_request_count gauge\n")
    source = make_in_flight(f"prometheus:{prom_server.url}#nv_inference_pending_request_count")
    assert source.read() == 0
    source.close()


def test_it_reads_a_command_that_prints_a_count() -> None:
    assert CommandInFlight("echo 12").read() == 12
    assert CommandInFlight("printf ' 4 requests\\n'").read() == 4
    assert CommandInFlight("echo busy").read() is None
    assert CommandInFlight("echo -3").read() is None
    assert CommandInFlight("exit 2").read() is None
    assert CommandInFlight("sleep 5; echo 1", timeout=0.3).read() is None


def test_it_needs_the_source_said_explicitly() -> None:
    assert isinstance(make_in_flight("none"), NoInFlight)
    assert make_in_flight("none").read() is None
    assert isinstance(make_in_flight("command:cat /run/serving/in-flight"), CommandInFlight)
    for bad in ("", "zero", "prometheus:http://x/metrics", "prometheus:#m", "prometheus:ftp://x#m",
                "command:", "prometheus:http://x/metrics#"):
        with pytest.raises(ValueError):
            make_in_flight(bad)
