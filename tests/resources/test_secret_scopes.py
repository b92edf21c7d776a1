"""A secret's `usable_by`: each list given restricts, each empty one allows any; senders (tools,
MCP servers, remote agents) are one dimension; agents and roles are a run's."""

from typing import TypedDict, Unpack

import pytest

from app.resources.secrets.scopes import UsableBy, refusal
from app.tools.services import SecretSender, SecretUse


class Run(TypedDict, total=False):
    """What a use within a run names besides its sender."""

    task_id: str
    agent: str
    user: str
    roles: frozenset[str]


IN_A_RUN: Run = {
    "task_id": "t1",
    "agent": "billing@3",
    "user": "alice",
    "roles": frozenset({"member"}),
}


def _use(
    sender: SecretSender = "tool", name: str = "http_request", **run: Unpack[Run]
) -> SecretUse:
    return SecretUse(sender, name, **run)


@pytest.mark.parametrize(
    ("usable_by", "use", "refused_for"),
    [
        (None, _use(**IN_A_RUN), None),
        (UsableBy(), _use(**IN_A_RUN), None),
        (UsableBy(), None, None),
        (UsableBy(roles=["member"]), None, "names no caller"),
        (UsableBy(agents=["billing"]), _use(**IN_A_RUN), None),
        (UsableBy(agents=["support"]), _use(**IN_A_RUN), "agent 'billing'"),
        (UsableBy(roles=["tenant_admin"]), _use(**IN_A_RUN), "'alice', who holds none"),
        (UsableBy(roles=["tenant_admin", "member"]), _use(**IN_A_RUN), None),
        (UsableBy(tools=["http_request"]), _use(**IN_A_RUN), None),
        (UsableBy(mcp_servers=["github"]), _use(**IN_A_RUN), "the tool 'http_request'"),
        (UsableBy(mcp_servers=["github"]), _use("mcp_server", "github"), None),
        (UsableBy(mcp_servers=["github"]), _use("mcp_server", "jira"), "MCP server 'jira'"),
        (UsableBy(remote_agents=["travel"]), _use("remote_agent", "travel"), None),
        # Outside a run (a session opened) only the sender is judged; each run's call is.
        (
            UsableBy(roles=["tenant_admin"], mcp_servers=["github"]),
            _use("mcp_server", "github"),
            None,
        ),
        (
            UsableBy(roles=["tenant_admin"], mcp_servers=["github"]),
            _use("mcp_server", "github", **IN_A_RUN),
            "who holds none",
        ),
    ],
)
def test_a_use_is_refused_exactly_where_a_given_list_does_not_name_it(
    usable_by: UsableBy | None, use: SecretUse | None, refused_for: str | None
) -> None:
    why = refusal(usable_by, "KEY", use)

    if refused_for is None:
        assert why is None
    else:
        assert why is not None
        assert refused_for in why
        assert why.startswith("the secret 'KEY' ")
