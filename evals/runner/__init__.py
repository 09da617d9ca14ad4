"""The Toolwatch eval runner: run a project's eval cases against its own tool functions.

Standalone by design: the standard library plus Toolwatch's pure modules (`ingest.normalize`,
`ingest.taxonomy`, `ingest.records`, `ingest.redact`, `ingest.limits`, `evals.expectations`,
`evals.judge`), never Django, so a CI job runs it from a checkout with nothing installed.

    python -m evals.runner --cases cases.jsonl --tools my_agent.tools:TOOLS [--post]

Modules: `loader` (JSONL cases, from a file or the API), `registry` (module:TOOLS),
`execute` (call with a timeout, judge), `client` (the Toolwatch API over urllib),
`cli` (flags, output, exit codes), `pytest_plugin` (each case a pytest item).
See docs/runner.md.
"""
