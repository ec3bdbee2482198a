"""The exporter backend: dcgm-exporter's series mapped to module fields through the
shipped mapping; what the exporter lacks is missing (None), never zero."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from agent.cp_agent import enrol, prom
from agent.cp_agent.backends import make_backend
from agent.cp_agent.exporter import FIELDS, ExporterBackend, load_mapping, parse_mapping
from tests.agent.promserver import PromServer

FIXTURE = Path(__file__).with_name("fixtures") / "dcgm-exporter-4gpu.prom"
ROOT = Path(__file__).resolve().parents[2]
UUIDS = ["GPU-3f1c2a9e-6b1d-4c55-9a0e-1d2b3c4d5e60", "GPU-7a2b9c10-2e4f-4b8a-8d3c-5f6e7a8b9c01",
         "GPU-a1b2c3d4-5e6f-4a7b-9c8d-0e1f2a3b4c52", "GPU-c9d8e7f6-1a2b-4c3d-8e9f-0a1b2c3d4e73"]


def without(text: str, metric: str, gpu: str) -> str:
    """The exposition text less one GPU's series of ``metric``."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not (line.startswith(metric + "{") and f'gpu="{gpu}"' in line))


def test_it_maps_the_fixture_for_four_modules(prom_server: PromServer) -> None:
    prom_server.serve(FIXTURE.read_text())
    backend = make_backend(f"exporter:{prom_server.url}", node="n-r1-08", serials=[], mapping="dcgm-exporter")
    assert isinstance(backend, ExporterBackend)
    records = backend.read()
    assert [r["serial"] for r in records] == UUIDS
    assert backend.modules() == UUIDS
    assert records[0] == {"serial": UUIDS[0], "util": 0.87, "temp_c": 61.0, "power_w": 63.412, "link_width": 16,
                          "link_width_expected": 16, "ecc_corrected": 0, "ecc_uncorrected": 0, "errors": 0}
    assert records[2]["link_width"] == 8 and records[2]["link_width_expected"] == 16  # trained at half width
    assert records[2]["errors"] == 117
    assert records[3]["util"] == 0.0 and records[3]["ecc_corrected"] == 12 and records[3]["ecc_uncorrected"] == 1
    assert all(set(r) == {"serial", *FIELDS} for r in records)
    assert all(v is not None for r in records for v in r.values())
    backend.close()


def test_it_reports_a_missing_series_as_none_and_logs_it_once(prom_server: PromServer,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    text = without(FIXTURE.read_text(), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1")
    prom_server.serve(text)
    backend = make_backend(f"exporter:{prom_server.url}", node="n", serials=[], mapping="dcgm-exporter")
    with caplog.at_level(logging.WARNING, logger="cp_agent.exporter"):
        for _ in range(3):
            records = {r["serial"]: r for r in backend.read()}
            assert records[UUIDS[1]]["ecc_uncorrected"] is None
            assert records[UUIDS[1]]["ecc_corrected"] == 3  # the rest of the module still reads
            assert records[UUIDS[0]]["ecc_uncorrected"] == 0
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1
    assert said[0].startswith(f"exporter has no DCGM_FI_DEV_ECC_DBE_VOL_TOTAL series for module {UUIDS[1]}")
    # It comes back: read again, and said again if it goes once more.
    prom_server.serve(FIXTURE.read_text())
    assert {r["serial"]: r for r in backend.read()}[UUIDS[1]]["ecc_uncorrected"] == 0
    backend.close()


def test_it_treats_dcgm_blank_sentinels_and_out_of_range_values_as_missing(prom_server: PromServer) -> None:
    text = FIXTURE.read_text()
    text = re.sub(r'(DCGM_FI_DEV_POWER_USAGE\{gpu="0"[^}]*\}) \S+', r"\1 140737488355328", text)  # FP64 blank
    text = re.sub(r'(DCGM_FI_DEV_PCIE_LINK_WIDTH\{gpu="1"[^}]*\}) \S+', r"\1 9223372036854775794", text)
    text = re.sub(r'(DCGM_FI_DEV_GPU_TEMP\{gpu="2"[^}]*\}) \S+', r"\1 4000", text)
    text = re.sub(r'(DCGM_FI_DEV_GPU_UTIL\{gpu="3"[^}]*\}) \S+', r"\1 102", text)
    prom_server.serve(text)
    backend = make_backend(f"exporter:{prom_server.url}", node="n", serials=[], mapping="dcgm-exporter")
    records = backend.read()
    assert records[0]["power_w"] is None and records[1]["link_width"] is None
    assert records[2]["temp_c"] is None  # 4000 °C is no temperature: missing rather than a refused batch
    assert records[3]["util"] == 1.0  # 102 % is rounding in the exporter: read as 1
    backend.close()


def test_it_reports_only_the_modules_the_control_plane_lists_with_aliases(prom_server: PromServer,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    prom_server.serve(FIXTURE.read_text())
    backend = make_backend(f"exporter:{prom_server.url}", node="n", serials=["AX-0001", "AX-0002", UUIDS[3]],
                           mapping="dcgm-exporter", aliases={UUIDS[0]: "AX-0001", UUIDS[1]: "AX-0002"})
    with caplog.at_level(logging.WARNING, logger="cp_agent.exporter"):
        assert [r["serial"] for r in backend.read()] == ["AX-0001", "AX-0002", UUIDS[3]]
        backend.read()
    strangers = [r.getMessage() for r in caplog.records if "does not list" in r.getMessage()]
    assert len(strangers) == 1 and UUIDS[2] in strangers[0]
    backend.close()


def test_it_reports_every_field_missing_while_the_exporter_is_down(prom_server: PromServer) -> None:
    prom_server.serve(FIXTURE.read_text())
    backend = make_backend(f"exporter:{prom_server.url}", node="n", serials=[], mapping="dcgm-exporter")
    assert len(backend.read()) == 4
    prom_server.serve("", status=500)
    down = backend.read()
    assert [r["serial"] for r in down] == UUIDS
    assert all(r[f] is None for r in down for f in FIELDS)
    backend.close()


def test_it_refuses_a_mapping_that_does_not_say_what_it_maps() -> None:
    with pytest.raises(ValueError, match="module_label"):
        parse_mapping({"fields": {"util": {"metric": "x"}}})
    with pytest.raises(ValueError, match=r"fields\.utilisation: not a module field"):
        parse_mapping({"module_label": "gpu", "fields": {"utilisation": {"metric": "x"}}})
    with pytest.raises(ValueError, match=r"fields\.util: give either metric or value"):
        parse_mapping({"module_label": "gpu", "fields": {"util": {}}})
    with pytest.raises(ValueError, match=r"fields\.util\.aggregate"):
        parse_mapping({"module_label": "gpu", "fields": {"util": {"metric": "x", "aggregate": "median"}}})
    with pytest.raises(ValueError, match="shipped mappings: dcgm-exporter"):
        load_mapping("no-such-exporter")
    with pytest.raises(ValueError, match="needs --mapping"):
        make_backend("exporter:http://127.0.0.1:9400/metrics", node="n", serials=[])


def _doc_mapping() -> str:
    """The NPU vendor example of agent/README.md (the TOML block after its marker)."""
    text = (ROOT / "agent" / "README.md").read_text()
    match = re.search(r"<!-- npu-mapping-example -->\s*```toml\n(.*?)```", text, re.S)
    assert match, "agent/README.md lost its NPU mapping example"
    return match.group(1)


NPU_EXPOSITION = """# HELP npu_core_utilization_ratio Busy share of one compute core.
# TYPE npu_core_utilization_ratio gauge
npu_core_utilization_ratio{npu="0",core="0"} 0.4
npu_core_utilization_ratio{npu="0",core="1"} 0.6
npu_core_utilization_ratio{npu="1",core="0"} 0.1
npu_core_utilization_ratio{npu="1",core="1"} 0.3
# HELP npu_temperature_celsius Die temperature.
# TYPE npu_temperature_celsius gauge
npu_temperature_celsius{npu="0",sensor="die"} 52
npu_temperature_celsius{npu="0",sensor="board"} 41
npu_temperature_celsius{npu="1",sensor="die"} 49
# HELP npu_power_milliwatts Board power.
# TYPE npu_power_milliwatts gauge
npu_power_milliwatts{npu="0"} 21500
npu_power_milliwatts{npu="1"} 14250
# HELP npu_ecc_errors_total Memory ECC errors since the driver loaded.
# TYPE npu_ecc_errors_total counter
npu_ecc_errors_total{npu="0",type="corrected"} 5
npu_ecc_errors_total{npu="0",type="uncorrected"} 0
npu_ecc_errors_total{npu="1",type="corrected"} 0
npu_ecc_errors_total{npu="1",type="uncorrected"} 0
# HELP npu_core_errors_total Compute core errors.
# TYPE npu_core_errors_total counter
npu_core_errors_total{npu="0"} 0
npu_core_errors_total{npu="1"} 2
# HELP npu_dma_errors_total DMA engine errors.
# TYPE npu_dma_errors_total counter
npu_dma_errors_total{npu="1"} 1
"""


def test_it_follows_the_documented_way_to_map_an_npu_exporter(tmp_path: Path) -> None:
    path = tmp_path / "acme-npu.toml"
    path.write_text(_doc_mapping())
    mapping = load_mapping(str(path))
    assert mapping.module_label == "npu"
    backend = ExporterBackend(url="http://unused/", mapping=mapping, aliases={"0": "NPU-A", "1": "NPU-B"})
    records = backend.map(prom.parse(NPU_EXPOSITION))
    backend.close()
    assert [r["serial"] for r in records] == ["NPU-A", "NPU-B"]
    assert records[0]["util"] == 0.5 and records[1]["util"] == 0.2  # the mean of the cores
    assert records[0]["temp_c"] == 52.0  # the die sensor, not the board's
    assert records[0]["power_w"] == 21.5 and records[1]["power_w"] == 14.25  # milliwatts scaled
    assert records[0]["ecc_corrected"] == 5 and records[0]["ecc_uncorrected"] == 0
    assert records[1]["errors"] == 3 and records[0]["errors"] == 0  # core + DMA errors
    assert records[0]["link_width_expected"] == 4  # a constant from the module's data sheet
    assert records[0]["link_width"] is None  # not exported: missing, not zero


def test_a_joining_node_lists_its_modules_from_the_exporter_through_the_mappings_discover_table(
        prom_server: PromServer) -> None:
    prom_server.serve(FIXTURE.read_text())
    backend = make_backend(f"exporter:{prom_server.url}", node="n-r1-08", serials=[], mapping="dcgm-exporter",
                           aliases={UUIDS[1]: "L4-SN-0002"})
    modules = enrol.discover_modules("exporter", exporter=backend)
    assert [m["serial"] for m in modules] == [UUIDS[0], "L4-SN-0002", UUIDS[2], UUIDS[3]]
    assert modules[0] == {"serial": UUIDS[0], "vendor": "NVIDIA", "model": "NVIDIA L4", "slot": 0, "pcie_lanes": 16,
                          "driver_version": "550.54.15"}
    assert [m["slot"] for m in modules] == [0, 1, 2, 3]
    # A label the exporter does not carry is refused by name, not sent as a module without a model.
    prom_server.serve(re.sub(r',modelName="[^"]*"', "", FIXTURE.read_text()))
    with pytest.raises(enrol.EnrolError, match=r"no label modelName for its model"):
        enrol.discover_modules("exporter", exporter=backend)
    backend.close()
    with pytest.raises(enrol.EnrolError, match="needs --backend exporter:URL"):
        enrol.discover_modules("exporter")


def test_it_refuses_a_discover_table_that_cannot_say_what_a_module_is() -> None:
    base = {"module_label": "gpu", "fields": {"util": {"metric": "x"}}}
    with pytest.raises(ValueError, match="vendor and model are required"):
        parse_mapping({**base, "discover": {"vendor": {"value": "NVIDIA"}}})
    with pytest.raises(ValueError, match=r"discover\.colour: not a join module field"):
        parse_mapping({**base, "discover": {"colour": {"value": "red"}}})
    with pytest.raises(ValueError, match=r"discover\.model: a table with exactly one of"):
        parse_mapping({**base, "discover": {"vendor": {"value": "A"}, "model": {"label": "m", "value": "x"}}})
    with pytest.raises(ValueError, match=r"discover\.pcie_lanes\.field: a field of \[fields\]"):
        parse_mapping({**base, "discover": {"vendor": {"value": "A"}, "model": {"label": "m"},
                                            "pcie_lanes": {"field": "link_width_expected"}}})
    no_table = parse_mapping(base)
    with pytest.raises(ValueError, match=r"no \[discover\] table"):
        ExporterBackend(url="http://127.0.0.1:1/metrics", mapping=no_table).discover()
