"""Pure helpers that settle what a span cannot know alone: its agent comes from an ancestor.

A parent span ends after its children, so SDKs often export it in a later request;
the services call these again when ancestors arrive.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Key = tuple[str, str]  # (trace_id, span_id)

# Deep enough for any real agent tree; stops a malicious parent cycle.
MAX_DEPTH = 512


def resolve_agent(key: Key, parents: Mapping[Key, str], agents: Mapping[Key, str]) -> str:
    """The agent named by the span itself or its nearest ancestor that names one; "" if none is known yet."""
    trace_id, span_id = key
    for _ in range(MAX_DEPTH):
        agent = agents.get((trace_id, span_id))
        if agent:
            return agent
        parent = parents.get((trace_id, span_id))
        if not parent:
            return ""
        span_id = parent
    return ""


def resolve_agents(keys: Iterable[Key], parents: Mapping[Key, str], agents: Mapping[Key, str]) -> dict[Key, str]:
    """Agents for the keys that now resolve to one; keys still unknown are left out."""
    resolved = {}
    for key in keys:
        agent = resolve_agent(key, parents, agents)
        if agent:
            resolved[key] = agent
    return resolved


def span_agent(attributes: Mapping) -> str:
    """The agent a span itself names (invoke_agent / create_agent spans, or any span carrying the attribute)."""
    value = attributes.get("gen_ai.agent.name")
    return value if isinstance(value, str) else ""
