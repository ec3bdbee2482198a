"""The pure wave planner: canary first, then waves within each tier's budget and floor."""

from __future__ import annotations

import pytest

from apps.rollouts.planner import PlanError, PlanNode, TierBudget, budget, parse_max_unavailable, plan_waves


def _nodes(tier: int, n: int, *, serving: bool = True, start: int = 0) -> list[PlanNode]:
    return [PlanNode(tier * 100 + start + i, f"t{tier}-{start + i}", tier, serving) for i in range(n)]


def test_canary_then_waves_never_take_more_serving_nodes_than_the_budget() -> None:
    tiers = {1: TierBudget(1, "access", active=8, floor=5, need=5, min_active_nodes=2),
             2: TierBudget(2, "hybrid", active=4, floor=1, need=1, min_active_nodes=1)}
    nodes = _nodes(1, 8) + _nodes(2, 4) + _nodes(2, 2, serving=False, start=10)
    waves = plan_waves(nodes, tiers, canary=1, wave_size=3, max_unavailable="25%")
    assert waves[0].canary and [n.tier_id for n in waves[0].nodes] == [1, 2]
    placed = [n.node_id for w in waves for n in w.nodes]
    assert sorted(placed) == sorted(n.node_id for n in nodes)  # every node once
    for w in waves:
        assert len(w.nodes) <= (2 if w.canary else 3)
        assert w.out(1) <= 2  # 25 % of 8, and 8 - 5 = 3 above the floor
        assert w.out(2) <= 1  # 25 % of 4
        for tid, t in tiers.items():
            assert t.active - w.out(tid) >= t.floor


def test_the_floor_caps_the_percentage() -> None:
    t = TierBudget(1, "access", active=10, floor=9, need=9, min_active_nodes=2)
    assert budget(parse_max_unavailable("50%"), t) == 1
    assert budget(parse_max_unavailable("3"), t) == 1
    assert budget(parse_max_unavailable("25%"), TierBudget(1, "a", 3, 0, 0, 0)) == 1  # at least one node


def test_a_tier_without_room_above_its_floor_is_refused_naming_it() -> None:
    tiers = {1: TierBudget(1, "access", active=3, floor=3, need=3, min_active_nodes=3, binding="traffic")}
    with pytest.raises(PlanError) as exc:
        plan_waves(_nodes(1, 3), tiers, canary=1, wave_size=2, max_unavailable="25%")
    assert exc.value.field == "max_unavailable" and exc.value.capacity
    assert "access" in exc.value.message and "floor 3" in exc.value.message
    # Standby nodes cost nothing: they are planned even so.
    waves = plan_waves(_nodes(1, 2, serving=False), tiers, canary=1, wave_size=2, max_unavailable="25%")
    assert [len(w.nodes) for w in waves] == [1, 1]


@pytest.mark.parametrize("value", ["0", "0%", "120%", "a", "-1", "25 percent", True])
def test_bad_max_unavailable_names_the_field(value: object) -> None:
    with pytest.raises(PlanError) as exc:
        parse_max_unavailable(value)
    assert exc.value.field == "max_unavailable"


def test_wave_size_and_canary_at_least_one() -> None:
    tiers = {1: TierBudget(1, "access", 4, 0, 0, 0)}
    for kwargs, name in (({"canary": 1, "wave_size": 0}, "wave_size"), ({"canary": 0, "wave_size": 1}, "canary")):
        with pytest.raises(PlanError) as exc:
            plan_waves(_nodes(1, 4), tiers, max_unavailable="25%", **kwargs)  # type: ignore[arg-type]
        assert exc.value.field == name


def test_a_canary_as_a_percentage_takes_that_share_of_each_tier_rounded_up() -> None:
    from apps.rollouts.planner import canary_text, parse_canary

    tiers = {1: TierBudget(1, "a", 10, 2, 2, 2), 2: TierBudget(2, "b", 3, 1, 1, 1)}
    nodes = _nodes(1, 10) + _nodes(2, 3)
    waves = plan_waves(nodes, tiers, canary="20%", wave_size=4, max_unavailable="50%")
    assert sorted(n.tier_id for n in waves[0].nodes) == [1, 1, 2]  # 20 % of 10 = 2; of 3 = 0.6 → 1
    # 2 per tier, but tier b may give up 1 serving node at once (3 active, floor 1, 50 % → 1).
    two = plan_waves(nodes, tiers, canary="2", wave_size=4, max_unavailable="50%")[0].nodes
    assert sorted(n.tier_id for n in two) == [1, 1, 2]
    assert len(plan_waves(nodes, tiers, canary="100%", wave_size=4, max_unavailable="100%")[0].nodes) == 10
    assert canary_text(" 10 % ") == "10%" and canary_text(3) == "3" and canary_text("12.5%") == "12.5%"
    for bad in (0, "0", "0%", "101%", "-1", "ten", True, None, 1.5, ""):
        with pytest.raises(PlanError) as exc:
            parse_canary(bad)
        assert exc.value.field == "canary"
