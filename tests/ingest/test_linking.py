from ingest.linking import resolve_agent, resolve_agents, span_agent

T = "t" * 32


def test_a_span_naming_an_agent_is_its_own_agent():
    assert resolve_agent((T, "a"), {}, {(T, "a"): "triage"}) == "triage"


def test_the_nearest_agent_ancestor_wins():
    parents = {(T, "tool"): "chat", (T, "chat"): "inner", (T, "inner"): "outer"}
    agents = {(T, "inner"): "billing", (T, "outer"): "triage"}

    assert resolve_agent((T, "tool"), parents, agents) == "billing"


def test_an_unknown_ancestor_leaves_the_agent_unresolved():
    assert resolve_agent((T, "tool"), {(T, "tool"): "missing"}, {}) == ""
    assert resolve_agents([(T, "tool")], {(T, "tool"): "missing"}, {}) == {}


def test_a_parent_cycle_does_not_hang():
    parents = {(T, "a"): "b", (T, "b"): "a"}

    assert resolve_agent((T, "a"), parents, {}) == ""


def test_ancestors_are_looked_up_within_the_same_trace_only():
    other = "o" * 32
    parents = {(T, "tool"): "agent"}
    agents = {(other, "agent"): "elsewhere"}

    assert resolve_agent((T, "tool"), parents, agents) == ""


def test_span_agent_reads_only_string_names():
    assert span_agent({"gen_ai.agent.name": "triage"}) == "triage"
    assert span_agent({"gen_ai.agent.name": 42}) == ""
    assert span_agent({}) == ""
