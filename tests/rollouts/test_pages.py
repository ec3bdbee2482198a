"""The rollout pages: the list, one rollout with its progress per wave and each node's step and
what it waits for (operators get the controls, viewers do not), and the new-rollout page reached
from a validated combination on the versions page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.inventory.choices import CombinationState
from apps.inventory.models import VersionCombination
from apps.rollouts import services
from tests.rollouts.conftest import RolloutFleet

pytestmark = pytest.mark.django_db


def _client(user: User) -> Client:
    c = Client()
    c.force_login(user)
    return c


def test_the_versions_page_links_a_validated_combination_to_a_preview(
        rfleet: RolloutFleet, viewer_user: User) -> None:
    page = _client(viewer_user).get("/combinations/").content.decode()
    assert f"/rollouts/new/?combination={rfleet.candidate.pk}" in page
    new = _client(viewer_user).get(f"/rollouts/new/?combination={rfleet.candidate.pk}")
    assert new.status_code == 200
    text = new.content.decode()
    assert 'id="preview-button"' in text and "Operators start rollouts" in text and 'id="start-button"' not in text
    VersionCombination.objects.filter(pk=rfleet.candidate.pk).update(state=CombinationState.CANDIDATE)
    blocked = _client(viewer_user).get(f"/rollouts/new/?combination={rfleet.candidate.pk}").content.decode()
    assert "only a validated combination is rolled out" in blocked


def test_the_rollout_page_shows_waves_and_what_each_node_waits_for(
        rfleet: RolloutFleet, viewer_user: User, operator_user: User) -> None:
    for i in range(1, 5):
        rfleet.node(f"n-{i}")
    spec = services.Spec(combination=rfleet.candidate, module_type=rfleet.mtype, suite=rfleet.suite, wave_size=2,
                         max_unavailable="2", bake_s=0, reason="new driver")
    rollout = services.rollout_create(spec=spec, actor="test")
    rfleet.tick(rollout)
    page = _client(viewer_user).get(f"/rollouts/{rollout.pk}/").content.decode()
    assert 'data-wave="0"' in page and 'data-wave="2"' in page and "Canary" in page
    canary = rollout.nodes.get(wave=0)
    assert canary.waiting_for and canary.waiting_for.split(":")[0] in page  # e.g. "draining n-1: ..."
    assert "waiting for its wave" in page
    assert "In this step since" in page and f"{canary.step_changed_at:%Y-%m-%d %H:%M:%S} UTC" in page
    assert 'id="rollout-controls"' not in page  # viewers see, cannot act
    operator_page = _client(operator_user).get(f"/rollouts/{rollout.pk}/").content.decode()
    assert 'data-control="pause"' in operator_page and 'data-control="rollback"' in operator_page
    listing = _client(viewer_user).get("/rollouts/").content.decode()
    assert f"/rollouts/{rollout.pk}/" in listing
