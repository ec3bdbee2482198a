"""Who may call what: the role policy as one table, route by route.

Written from the role policy (docs/security.md), not recorded from the code's
answers: ``tests/security/test_access_matrix.py`` walks the URL conf, calls every
route with every method as each kind of caller, and checks each answer against
this table. A route missing from the table fails that test, so no route ships
without its row.

The role policy:

- **viewer** reads everything operators see (fleet, inventory, telemetry, audit,
  planner computations, rollout previews); **operator** also acts on the fleet (cordon, drain,
  maintenance, quarantine, scaling, autoscaler policies, commands to agents,
  simulator faults, acknowledging and silencing health findings, regression vector
  suites and runs, validating a candidate
  combination on the gray pool, driver rollouts); **admin** also changes the inventory, version pins and agent
  keys, the gray pool and the health checks' parameters, and uses the admin site. Roles are cumulative.
- **Agent keys**: a node's key sends its node's telemetry, reads its commands and
  its own node, acks its commands, fetches the vectors it is asked to run; the
  gateway's key sends tier and stage samples and reads what the gateway needs
  (schedulable nodes, simulator faults). A revoked or expired key is nobody. Agent
  keys never reach user endpoints.
- **Scopes**: an operator may be limited to tiers or racks. Routes that act on a node, a module, a
  tier or a rollout (``SCOPED``) refuse an object outside the caller's scope with 403 naming the
  scope; reading stays fleet-wide.
- **Service accounts** act through the API only, with a token (``Authorization: Bearer``), as
  the role and scope they were given; they have no session, so no page, admin page or websocket.
  An expired or revoked token is nobody.
- **Anonymous** callers (and expired sessions) reach only the health probes, the
  login page and static assets, and a joining node's two routes (its join and its poll), which
  read no credentials and prove themselves in the body: a bootstrap token, an enrolment secret.

Callers: ``anonymous``, ``viewer``, ``operator``, ``admin`` (users: an API token
for ``api/`` routes, a session for pages), ``node_key`` (the key of the node a
route names, or any node for key-scoped routes), ``other_node_key`` (the key of
another node), ``gateway_key``, ``revoked_key`` (a revoked node key),
``expired_session`` (a viewer whose session has expired), ``scoped_operator`` (an operator whose
scope is the hybrid inference tier), ``other_scope_operator`` (an operator whose scope is the access
& logic tier), ``service_account`` (an operator
service account's token: API routes only), ``expired_service_token`` (a service account's token
past its expiry).
"""

from __future__ import annotations

CALLERS = ("anonymous", "viewer", "operator", "admin", "node_key", "other_node_key", "gateway_key",
           "revoked_key", "expired_session", "scoped_operator", "other_scope_operator", "service_account",
           "expired_service_token")

EVERYONE = frozenset(CALLERS)
# Scoped operators are operators: the role decides the route; the scope decides the object (SCOPED below).
PEOPLE_OPERATORS = frozenset({"operator", "admin", "scoped_operator", "other_scope_operator"})
PEOPLE_VIEWERS = PEOPLE_OPERATORS | {"viewer"}  # sessions: pages, forms, websockets
VIEWERS = PEOPLE_VIEWERS | {"service_account"}  # the API: people's tokens and service accounts'
OPERATORS = PEOPLE_OPERATORS | {"service_account"}
ADMINS = frozenset({"admin"})
NODE_AGENTS = frozenset({"node_key", "other_node_key"})  # key-scoped: each node's key sees its own
AGENTS = NODE_AGENTS | {"gateway_key"}
NODE_OWNER = frozenset({"node_key"})  # routes naming one node's object: only that node's key

# Shapes of rows.
READ = {"GET": VIEWERS}
READ_WRITE_OPERATOR = {"GET": VIEWERS, "POST": OPERATORS}
OPERATOR_ACTION = {"POST": OPERATORS}
CRUD_ADMIN = {"GET": VIEWERS, "POST": ADMINS}
DETAIL_ADMIN = {"GET": VIEWERS, "PUT": ADMINS, "PATCH": ADMINS, "DELETE": ADMINS}
DETAIL_OPERATOR = {"GET": VIEWERS, "PUT": OPERATORS, "PATCH": OPERATORS, "DELETE": OPERATORS}
COMPUTE = {"POST": VIEWERS}  # read-only computations a viewer may POST to
PAGE = {"GET": PEOPLE_VIEWERS}

# Route (as the URL conf spells it, format suffixes folded in) -> method -> callers allowed.
POLICY: dict[str, dict[str, frozenset[str]]] = {
    # Probes and assets: anyone.
    "healthz": {"GET": EVERYONE},
    "readyz": {"GET": EVERYONE},
    # Not by role: a bearer token (METRICS_TOKEN) or an allowed address; the tests scrape from loopback.
    "metrics": {"GET": EVERYONE},
    "static-pkg/plotly.min.js": {"GET": EVERYONE},
    # Session: the login page is for everyone; logging out needs a session.
    "login/": {"GET": EVERYONE, "POST": EVERYONE, "PUT": EVERYONE},  # Django's form view takes PUT as POST
    "logout/": {"POST": EVERYONE},
    # Single sign-on: anyone may start a sign-in and come back from the provider (404 when not configured).
    "sso/login/": {"GET": EVERYONE},
    "sso/callback/": {"GET": EVERYONE},
    # Pages.
    "": PAGE,
    "racks/": PAGE,
    "tiers/<int:pk>/": PAGE,
    "nodes/": PAGE,
    "nodes/saved-view/": {"POST": PEOPLE_VIEWERS},  # a user's own default view of the node list
    "nodes/<int:pk>/": PAGE,
    "combinations/": PAGE,
    "drift/": PAGE,
    "enrolments/": PAGE,
    "enrolments/decide/": {"POST": ADMINS},  # the enrolment page's approve and reject form
    "audit/": PAGE,
    "planner/": PAGE,
    "operations/": PAGE,
    "windows/": PAGE,
    "vectors/": PAGE,
    "versions/": PAGE,  # the vector page's first address: viewers are redirected to vectors/
    "health/": PAGE,
    "health/findings/<int:pk>/acknowledge/": {"POST": PEOPLE_OPERATORS},  # the page's forms
    "health/silences/": {"POST": PEOPLE_OPERATORS},
    "vector-runs/<int:pk>/": PAGE,
    "rollouts/": PAGE,
    "rollouts/new/": PAGE,
    "rollouts/<int:pk>/": PAGE,
    # The admin site: admins only (every admin page, one rule), but its login page.
    "admin/*": {"GET": ADMINS, "POST": ADMINS},
    "admin/login/": {"GET": EVERYONE, "POST": EVERYONE},
    # API schema and its browser.
    "api/schema/": READ,
    "api/docs/": READ,
    "api/v1/me/": READ,
    # Service accounts and their tokens: admins only.
    "api/v1/service-accounts/": {"GET": ADMINS, "POST": ADMINS},
    "api/v1/service-accounts/<pk>/": {"GET": ADMINS},
    "api/v1/service-accounts/<pk>/tokens/": {"GET": ADMINS, "POST": ADMINS},
    "api/v1/service-accounts/<int:pk>/tokens/<int:token_id>/revoke/": {"POST": ADMINS},
    # Fleet operations.
    "api/v1/nodes/actions/": OPERATOR_ACTION,  # one action on many nodes, within the caller's scope
    "api/v1/nodes/<int:pk>/cordon/": OPERATOR_ACTION,
    "api/v1/nodes/<int:pk>/drain/": OPERATOR_ACTION,
    "api/v1/nodes/<int:pk>/uncordon/": OPERATOR_ACTION,
    "api/v1/nodes/<int:pk>/maintenance/": OPERATOR_ACTION,
    "api/v1/nodes/<int:pk>/maintenance/leave/": OPERATOR_ACTION,
    "api/v1/modules/<int:pk>/quarantine/": OPERATOR_ACTION,
    "api/v1/modules/<int:pk>/release/": OPERATOR_ACTION,
    "api/v1/tiers/<int:pk>/scale/": OPERATOR_ACTION,
    "api/v1/nodes/<int:pk>/gray/": {"POST": ADMINS},
    "api/v1/nodes/<int:pk>/decommission/": {"POST": ADMINS},  # revoke its keys and retire it, for good
    "api/v1/schedulable/": {"GET": VIEWERS | {"gateway_key"}},
    "api/v1/drains/": READ,
    "api/v1/drains/<pk>/": READ,
    "api/v1/quarantines/": READ,
    "api/v1/quarantines/<pk>/": READ,
    "api/v1/scale-requests/": READ,
    "api/v1/scale-requests/<pk>/": READ,
    "api/v1/autoscaler-policies/": READ_WRITE_OPERATOR,
    "api/v1/autoscaler-policies/<pk>/": DETAIL_OPERATOR,
    "api/v1/autoscaler-decisions/": READ,
    "api/v1/autoscaler-decisions/<pk>/": READ,
    "api/v1/change-windows/": CRUD_ADMIN,
    "api/v1/change-windows/<pk>/": DETAIL_ADMIN,
    "api/v1/freezes/": CRUD_ADMIN,
    "api/v1/freezes/<pk>/": DETAIL_ADMIN,
    # Inventory and version pins: admins write.
    "api/v1/racks/": CRUD_ADMIN,
    "api/v1/racks/<pk>/": DETAIL_ADMIN,
    "api/v1/tiers/": CRUD_ADMIN,
    "api/v1/tiers/<pk>/": DETAIL_ADMIN,
    "api/v1/nodes/": CRUD_ADMIN,
    "api/v1/nodes/bulk/": {"POST": ADMINS},
    "api/v1/nodes/<pk>/": DETAIL_ADMIN,
    "api/v1/module-types/": CRUD_ADMIN,
    "api/v1/module-types/<pk>/": DETAIL_ADMIN,
    "api/v1/modules/": CRUD_ADMIN,
    "api/v1/modules/bulk/": {"POST": ADMINS},
    "api/v1/modules/drift/": READ,
    "api/v1/modules/<pk>/": DETAIL_ADMIN,
    "api/v1/driver-releases/": CRUD_ADMIN,
    "api/v1/driver-releases/<pk>/": DETAIL_ADMIN,
    "api/v1/framework-releases/": CRUD_ADMIN,
    "api/v1/framework-releases/<pk>/": DETAIL_ADMIN,
    "api/v1/version-combinations/": CRUD_ADMIN,
    "api/v1/version-combinations/<pk>/": DETAIL_ADMIN,
    "api/v1/version-combinations/<pk>/set-state/": {"POST": ADMINS},
    "api/v1/external-endpoints/": CRUD_ADMIN,
    "api/v1/external-endpoints/<pk>/": DETAIL_ADMIN,
    "api/v1/audit-events/": READ,
    "api/v1/audit-events/<pk>/": READ,
    # Agents.
    "api/v1/telemetry/": {"POST": AGENTS},
    "api/v1/agent/self/": {"GET": NODE_AGENTS},
    "api/v1/agent/commands/": {"GET": NODE_AGENTS},
    "api/v1/agent/commands/<int:pk>/ack/": {"POST": NODE_OWNER},
    "api/v1/agent-tokens/": {"GET": ADMINS, "POST": ADMINS},
    "api/v1/agent-tokens/<pk>/": {"GET": ADMINS},
    "api/v1/agent-tokens/<pk>/revoke/": {"POST": ADMINS},
    "api/v1/agent-tokens/<pk>/rotate/": {"POST": ADMINS},
    # Self-enrolment: admins hold the bootstrap tokens and decide; viewers read the enrolments; a joining
    # agent proves itself in the body (a bootstrap token to join, its enrolment secret to poll), so the
    # role check lets everyone through to that proof.
    "api/v1/bootstrap-tokens/": {"GET": ADMINS, "POST": ADMINS},
    "api/v1/bootstrap-tokens/<pk>/": {"GET": ADMINS},
    "api/v1/bootstrap-tokens/<pk>/revoke/": {"POST": ADMINS},
    "api/v1/enrolments/": {"GET": VIEWERS, "POST": EVERYONE},
    "api/v1/enrolments/<pk>/": READ,
    "api/v1/enrolments/approve/": {"POST": ADMINS},
    "api/v1/enrolments/reject/": {"POST": ADMINS},
    "api/v1/enrolments/<pk>/approve/": {"POST": ADMINS},
    "api/v1/enrolments/<pk>/reject/": {"POST": ADMINS},
    "api/v1/enrolments/<pk>/claim/": {"POST": EVERYONE},
    # Telemetry reads and commands to agents.
    "api/v1/fleet/snapshot/": READ,
    "api/v1/fleet/series/queue-depth/": READ,
    "api/v1/fleet/series/stage-latency/": READ,
    "api/v1/fleet/latency/": READ,
    "api/v1/fleet/nodes/<int:pk>/history/": READ,
    "api/v1/node-commands/": READ_WRITE_OPERATOR,
    "api/v1/node-commands/<pk>/": READ,
    # Health: viewers read findings; operators acknowledge and silence; admins tune the checks.
    "api/v1/health/checks/": READ,
    "api/v1/health/checks/<str:name>/": {"GET": VIEWERS, "PATCH": ADMINS},
    "api/v1/health/findings/": READ,
    "api/v1/health/findings/<pk>/": READ,
    "api/v1/health/findings/<pk>/acknowledge/": OPERATOR_ACTION,
    "api/v1/health/findings/<pk>/reset-breaker/": {"POST": ADMINS},
    "api/v1/health/silences/": READ_WRITE_OPERATOR,
    # Regression vectors: operators run them; agents fetch what they are asked to run.
    "api/v1/vector-suites/": READ,
    "api/v1/vector-suites/upload/": {"POST": OPERATORS},
    "api/v1/vector-suites/<pk>/": READ,
    "api/v1/vector-suites/<pk>/publish/": {"POST": OPERATORS},
    "api/v1/vectors/": READ,
    "api/v1/vectors/<pk>/": READ,
    "api/v1/vector-runs/": READ_WRITE_OPERATOR,
    "api/v1/vector-runs/<pk>/": READ,
    "api/v1/vector-runs/<pk>/cancel/": OPERATOR_ACTION,
    "api/v1/vector-results/": READ,
    "api/v1/vector-results/<pk>/": READ,
    "api/v1/version-combinations/<int:pk>/validate/": OPERATOR_ACTION,
    "api/v1/agent/vectors/<str:sha256>/": {"GET": NODE_AGENTS},
    # Driver rollouts: operators steer them; a preview writes nothing, so viewers may ask for one.
    "api/v1/rollouts/": READ_WRITE_OPERATOR,
    "api/v1/rollouts/preview/": COMPUTE,
    "api/v1/rollouts/<pk>/": READ,
    "api/v1/rollouts/<pk>/nodes/": READ,
    "api/v1/rollouts/<pk>/cohorts/": READ,
    "api/v1/rollouts/<pk>/pause/": OPERATOR_ACTION,
    "api/v1/rollouts/<pk>/resume/": OPERATOR_ACTION,
    "api/v1/rollouts/<pk>/abort/": OPERATOR_ACTION,
    "api/v1/rollouts/<pk>/rollback/": OPERATOR_ACTION,
    # Planner: computations, nothing stored.
    "api/v1/planner/array/": COMPUTE,
    "api/v1/planner/array/chart/": COMPUTE,
    "api/v1/planner/agents/": COMPUTE,
    "api/v1/planner/cost/": COMPUTE,
    "api/v1/planner/what-if/": {"GET": VIEWERS, "POST": VIEWERS},
    # Simulator faults: the gateway (the simulator plays it) reads them.
    "api/v1/simulator/faults/": {"GET": VIEWERS | {"gateway_key"}, "POST": OPERATORS},
    "api/v1/simulator/faults/<pk>/": {"GET": VIEWERS | {"gateway_key"}, "PATCH": OPERATORS},
    # The dashboard's reads.
    "api/v1/live/snapshot/": READ,
    "api/v1/live/figures/fleet/": READ,
    "api/v1/live/figures/tiers/<int:pk>/": READ,
    "api/v1/live/figures/nodes/<int:pk>/": READ,
    "api/v1/live/nodes/<int:pk>/": READ,
    "api/v1/leases/": READ,
}

# Routes that act on objects a scope may leave out, and what each names: an operator whose scope leaves
# the object out is refused (403 naming the scope); one whose scope holds it is not.
SCOPED: dict[str, str] = {
    "api/v1/nodes/actions/": "nodes",
    "api/v1/nodes/<int:pk>/cordon/": "node",
    "api/v1/nodes/<int:pk>/drain/": "node",
    "api/v1/nodes/<int:pk>/uncordon/": "node",
    "api/v1/nodes/<int:pk>/maintenance/": "node",
    "api/v1/nodes/<int:pk>/maintenance/leave/": "node",
    "api/v1/modules/<int:pk>/quarantine/": "module",
    "api/v1/modules/<int:pk>/release/": "module",
    "api/v1/tiers/<int:pk>/scale/": "tier",
    "api/v1/node-commands/": "node_body",
    "api/v1/autoscaler-policies/": "tier_body",
}

# Websocket paths: viewers and up; everyone else is closed before any frame.
WEBSOCKETS: dict[str, frozenset[str]] = {
    "ws/fleet/": PEOPLE_VIEWERS,
    "ws/tiers/<int:tier_id>/": PEOPLE_VIEWERS,
    "ws/nodes/<int:node_id>/": PEOPLE_VIEWERS,
}
