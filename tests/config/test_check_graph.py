"""``toolkeeper check``'s rules read from the dependency graph, each at its node."""

from __future__ import annotations

from pathlib import Path

from toolkeeper.config import Rule, check, load_text

HERE = Path(__file__).resolve().parent

HEAD = "version: 1\ntools:\n"
TICKETS = ("  - name: tickets\n    implementation_type: http\n"
           "    implementation: {url: 'https://x.example'}\n"
           "    actions: {open: {}, close: {}}\n")


def _rules(text: str) -> list[tuple[str, str]]:
    return [(v.rule, v.path) for v in check(load_text(text, "tk.yaml"), base_dir=HERE)]


def test_a_compensation_naming_another_tools_missing_action_is_found() -> None:
    """(An action of the tool itself is checked when the config loads.)"""
    mail = ("  - name: mail\n    implementation_type: http\n"
            "    implementation: {url: 'https://m.example'}\n"
            "    compensation: {run: {tool: tickets, action: reopen}}\n")
    text = (HEAD + TICKETS + mail +
            "profiles: [{name: p, activations: [{tool: tickets}, {tool: mail}]}]\n")
    assert _rules(text) == [(Rule.COMPENSATION_TARGET_MISSING.value, "tools[1]")]
    good = text.replace("reopen", "close")
    assert _rules(good) == []


def test_a_compensation_naming_a_missing_tool_is_found() -> None:
    text = (HEAD + TICKETS + "    compensation: {open: {tool: gone, action: close}}\n"
            "profiles: [{name: p, activations: [{tool: tickets}]}]\n")
    assert _rules(text) == [(Rule.COMPENSATION_TARGET_MISSING.value, "tools[0]")]


def test_a_tool_no_profile_of_its_tenant_activates_is_found() -> None:
    other = TICKETS.replace("tickets", "mail")
    text = HEAD + TICKETS + other + "profiles: [{name: p, activations: [{tool: tickets}]}]\n"
    assert _rules(text) == [(Rule.TOOL_NOT_ACTIVATED.value, "tools[1]")]
    # a file without profiles does not claim to wire its tenant: nothing to say
    assert _rules(HEAD + TICKETS + other) == []


def test_an_agent_call_cycle_among_published_endpoints_is_found() -> None:
    text = (HEAD +
            "  - {name: ask_b, implementation_type: agent_call,"
            " implementation: {target_agent_slug: b}}\n"
            "  - {name: ask_a, implementation_type: agent_call,"
            " implementation: {target_agent_slug: a}}\n"
            "profiles:\n  - {name: pa, activations: [{tool: ask_b}]}\n"
            "  - {name: pb, activations: [{tool: ask_a}]}\n"
            "agents:\n"
            "  - {name: a, profile: pa, endpoint: {transport: http, url: 'https://a.example',"
            " status: published}}\n"
            "  - {name: b, profile: pb, endpoint: {transport: http, url: 'https://b.example',"
            " status: published}}\n")
    assert _rules(text) == [(Rule.AGENT_CALL_CYCLE.value, "agents[0]")]
    assert _rules(text.replace("status: published}}\n", "status: draft}}\n", 1)) == []
