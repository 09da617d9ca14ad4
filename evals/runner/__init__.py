"""The Toolwatch eval runner: run a project's eval cases against its own tool functions.

Standalone by design: the standard library plus Toolwatch's pure modules (`ingest.normalize`,
`ingest.taxonomy`, `ingest.records`, `ingest.redact`, `ingest.limits`, `evals.expectations`,
`evals.judge`), never Django and nothing from PyPI, so a CI job can run it with nothing else
installed:

    pip install "toolwatch-runner @ git+https://github.com/OWNER/toolwatch#subdirectory=evals/runner"
    toolwatch-evals --cases cases.jsonl --tools my_agent.tools:TOOLS [--post]

or from a checkout, `python -m evals.runner …`. The distribution (evals/runner/pyproject.toml,
built by evals/runner/build_hook/hatch_build.py) ships these same modules as one flat package,
`toolwatch_runner`, with their imports rewritten; this package stays their only source.

Modules: `loader` (JSONL cases, from a file or the API), `registry` (module:TOOLS),
`execute` (call with a timeout, judge), `client` (the Toolwatch API over urllib),
`cli` (flags, output, exit codes), `pytest_plugin` (each case a pytest item).
For agents (docs/agents.md): `breaker` (a circuit breaker reading the tool-health feed, failing
open) and `instrument` (`@tool_call`: tool errors' envelopes on OpenTelemetry spans, when installed).
See docs/runner.md.
"""

# The distribution's version (read by hatchling: [tool.hatch.version] in pyproject.toml).
__version__ = "1.0.0"
