"""``cpctl get`` and ``cpctl describe``: reads, rendered as tables or as the API's objects."""

from __future__ import annotations

from typing import Any

from cpctl import output
from cpctl.client import Client
from cpctl.resources import ALIASES, KINDS, Kind
from cpctl.session import Session


def _params(client: Client, kind: Kind, args: Any) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for f in kind.filters:
        value = getattr(args, f"filter_{f.param}", None)
        if value in (None, []):
            continue
        if f.lookup:  # the API filters by id here: find it by the operators' name
            target = KINDS[f.lookup]
            assert target.by_name
            value = [client.one(target.path, {target.by_name: v}, f"{target.name[:-1]} named {v!r}")["id"]
                     for v in (value if isinstance(value, list) else [value])]
        params[f.param] = value
    return params


def get(session: Session) -> int:
    args = session.args
    kind = ALIASES[args.kind]
    with session.client() as client:
        if args.names:
            if not kind.by_name:
                rows = [client.get(f"{kind.path}{name}/") for name in args.names]
            else:
                rows = [client.one(kind.path, {kind.by_name: name}, f"{kind.name[:-1]} named {name!r}")
                        for name in args.names]
        else:
            rows = list(client.list(kind.path, _params(client, kind, args)))
    columns = kind.columns + (kind.wide if args.output == "wide" else ())
    output.render(rows, columns, args.output, session.out)
    return 0


def node_by_name(client: Client, name: str) -> dict[str, Any]:
    return client.one(KINDS["nodes"].path, {"hostname": name}, f"node named {name!r}")


def describe_node(session: Session) -> int:
    args = session.args
    with session.client() as client:
        node = node_by_name(client, args.name)
        live = client.get(f"/api/v1/live/nodes/{node['id']}/")
        findings = list(client.list("/api/v1/health/findings/", {"node": node["id"],
                                                                  "state": ["open", "acknowledged"]}))
        audit = client.get("/api/v1/audit-events/", {"target_type": "node", "target_id": node["id"],
                                                     "limit": args.audit})["results"]
    if args.output in ("json", "yaml"):
        data = {"node": node, "live": live, "findings": findings, "audit": audit}
        session.out.write(output.dump(data, args.output) + "\n")
        return 0
    session.out.write(describe_text(node, live, findings, audit) + "\n")
    return 0


def describe_text(node: dict[str, Any], live: dict[str, Any], findings: list[dict[str, Any]],
                  audit: list[dict[str, Any]]) -> str:
    c = output.cell
    lines = [
        f"Name:      {node['hostname']}",
        f"State:     {live['state']} (since {c(live.get('state_changed_at'))})",
        f"Tier:      {c(node.get('tier_kind'))}",
        f"Rack:      {c(node.get('rack_name'))}, slot {c(node.get('slot'))}",
        f"Actions:   {', '.join(live.get('allowed_actions') or []) or '-'}",
    ]
    for w in node.get("warnings") or []:
        lines.append(f"Warning:   {w.get('message')}")
    hold = live.get("hold")
    if hold:
        lines.append(f"Hold:      {hold['kind']} ({hold['state']}) by {c(hold.get('by'))} as {hold['owner']}, "
                     f"since {c(hold.get('started_at'))}: {c(hold.get('reason'))}")
        lines.append(f"Waiting:   {c(hold.get('waiting_for'))}")
    else:
        lines.append("Hold:      none")
    latest = live.get("latest")
    if latest:
        lines.append(f"Report:    {c(latest.get('age_s'))} s ago: in flight {c(latest.get('in_flight'))}, "
                     f"CPU {_pct(latest.get('cpu_util'))}, memory {_pct(latest.get('mem_util'))}")
    else:
        lines.append("Report:    none yet")
    lines.append("Modules:")
    modules = live.get("modules") or []
    if modules:
        rows = [[m["slot"], m["serial"], m["state"], m.get("driver"), m.get("framework"),
                 _pct((m.get("latest") or {}).get("util")), (m.get("latest") or {}).get("temp_c")] for m in modules]
        lines.append(_indent(output.table(rows, ["SLOT", "SERIAL", "STATE", "DRIVER", "FRAMEWORK", "UTIL", "TEMP C"])))
    else:
        lines.append("  none")
    lines.append("Open findings:")
    if findings:
        rows = [[f["id"], f["check"], f["severity"], f["state"], f["summary"]] for f in findings]
        lines.append(_indent(output.table(rows, ["ID", "CHECK", "SEVERITY", "STATE", "SUMMARY"])))
    else:
        lines.append("  none")
    lines.append("Recent audit:")
    if audit:
        rows = [[e["time"], e.get("actor_name"), e["action"], e.get("reason")] for e in audit]
        lines.append(_indent(output.table(rows, ["TIME", "ACTOR", "ACTION", "REASON"])))
    else:
        lines.append("  none")
    return "\n".join(lines)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{float(value) * 100:.0f}%"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
