"""``manage.py fault <kind> [--node H] [--combination ID] [--off]``: switch a simulated fault."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.audit.choices import Source
from apps.common.errors import django_errors
from apps.inventory.models import Node, VersionCombination
from apps.simulator import services
from apps.simulator.choices import FaultKind
from apps.simulator.selectors import fault_list


class Command(BaseCommand):
    help = "Switch a fault of the simulated fleet on or off (`fault list` shows them; `fault all --off` clears)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("kind", choices=[*FaultKind.values, "list", "all"])
        parser.add_argument("--node", help="hostname of the node to strike (node faults)")
        parser.add_argument("--combination", type=int, help="version combination id (bad_combination)")
        parser.add_argument("--params", help='JSON object, e.g. \'{"operator": "Softmax"}\'')
        parser.add_argument("--off", action="store_true", help="switch the fault off")
        parser.add_argument("--reason", default="")

    def handle(self, *args: Any, **opts: Any) -> None:
        kind = opts["kind"]
        if kind == "list":
            for f in fault_list():
                self.stdout.write(f"{f.pk:>4} {'ON ' if f.enabled else 'off'} {f.kind:<16} "
                                  f"{f.node or f.combination or '-'} {json.dumps(f.params)}")
            return
        if kind == "all":
            if not opts["off"]:
                raise CommandError("`fault all` only switches everything off: add --off")
            n = services.fault_disable_all(actor="manage.py fault", source=Source.SYSTEM, reason=opts["reason"])
            self.stdout.write(f"{n} fault(s) switched off")
            return
        try:
            node = Node.objects.get(hostname=opts["node"]) if opts["node"] else None
            combination = VersionCombination.objects.get(pk=opts["combination"]) if opts["combination"] else None
            params = json.loads(opts["params"]) if opts["params"] else None
            fault = services.fault_set(kind=kind, enabled=not opts["off"], node=node, combination=combination,
                                       params=params, actor="manage.py fault", source=Source.SYSTEM,
                                       reason=opts["reason"])
        except Node.DoesNotExist as exc:
            raise CommandError(f"no node {opts['node']!r}") from exc
        except VersionCombination.DoesNotExist as exc:
            raise CommandError(f"no version combination {opts['combination']}") from exc
        except json.JSONDecodeError as exc:
            raise CommandError(f"--params is not JSON: {exc}") from exc
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in django_errors(exc).items())) from exc
        self.stdout.write(f"{fault} params={json.dumps(fault.params)}")
