"""The /health/ page and the node page: open findings with the advisor's cause, how to
confirm and remedy; acknowledge with a reason."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from apps.health.choices import FindingState
from apps.health.models import Finding
from tests.health.conftest import HealthFleet, sweeps


def test_the_health_page_and_the_node_page_show_the_finding_with_its_advice(
        hfleet: HealthFleet, operator_user: User, viewer_user: User) -> None:
    hfleet.node("n-0")
    node = hfleet.node("n-1")
    hfleet.all_report(modules={"n-1-m1": {"link_width": 2}})
    sweeps(3)
    f = Finding.objects.get(check_name="link_width")
    client = Client()
    client.force_login(viewer_user)
    page = client.get("/health/").content.decode()
    assert f'data-finding="{f.pk}"' in page and "PCIe link trained at x2, expected x4" in page
    assert "lane budget is exceeded" in page and "Rebalance modules" in page and "link width reported" in page
    assert "Acknowledge" not in page  # viewers read only
    assert f'data-finding="{f.pk}"' not in client.get("/health/?check=ecc").content.decode()
    node_page = client.get(f"/nodes/{node.pk}/").content.decode()
    assert 'id="node-findings"' in node_page and "Rebalance modules" in node_page
    assert "No open findings on this node." in client.get(f"/nodes/{hfleet.nodes['n-0'].pk}/").content.decode()

    client.force_login(operator_user)
    r = client.post(f"/health/findings/{f.pk}/acknowledge/", {"reason": "moving a module", "next": "/health/"})
    assert r.status_code == 302
    f.refresh_from_db()
    assert f.state == FindingState.ACKNOWLEDGED and f.acknowledge_reason == "moving a module"
    assert "acknowledged by test-operator: moving a module" in client.get("/health/").content.decode()
