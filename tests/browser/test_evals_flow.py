"""(d) Eval cases end to end, as a new user does it (docs/contract/eval-cases.md, docs/evals.md, docs/runner.md).

A flights search fails in production with a validation error that names no field. The
user opens the trace, promotes the failed call to an eval case, pins it, downloads the
JSONL, makes an API token, and runs the cases in "CI" (`python -m evals.runner`, a real
subprocess) against the live server: the fix passes; the bug coming back is a
**regression** that the run, the case and the alerts say, and the project's webhook gets.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.trace import Status, StatusCode
from playwright.sync_api import expect

from config.celery import app as celery_app
from dashboard.alerting.transports import verify_signature
from dashboard.models import AlertChannel
from tests.browser.conftest import ingest, screenshot
from tests.evals.sample_tools import BAD_DATE_ARGS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<script>alert(1)</script><b>x</b>"
# A validation error that says neither which field is wrong nor how to repair it.
MESSAGE = f"Invalid input {HOSTILE}"
ANY = re.compile(".*")
FIXED_TOOLS = "tests.evals.sample_tools.flights_fixed:TOOLS"
BROKEN_TOOLS = "tests.evals.sample_tools.flights_broken:TOOLS"


# --- a loopback webhook receiver, and deliveries sent as a worker would send them -------


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.received.append((dict(self.headers), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def webhook(settings, project):
    """The project's webhook channel, pointing at a receiver on 127.0.0.1 (allowed for this test)."""
    settings.TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS = True
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.daemon_threads = True
    server.received = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    channel = AlertChannel.objects.create(
        project=project, kind="webhook", name="On-call hook", target=f"http://127.0.0.1:{server.server_port}/hook"
    )
    yield channel, server.received
    server.shutdown()
    server.server_close()


@pytest.fixture
def deliveries_sent_at_once():
    """Celery tasks run in the caller (the live server's thread), after commit: the delivery a
    regression queues is sent before the runner's POST returns, as a worker would send it."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.update(task_always_eager=True)
    yield
    celery_app.conf.update(task_always_eager=previous)


# --- the failure in production ----------------------------------------------------------


@pytest.fixture
def failed_search(live_server, project):
    """A search_flights call that failed in production, with its arguments, sent over OTLP."""
    ids: dict[str, str] = {}

    def build(tracer) -> None:
        with tracer.start_as_current_span(
            "invoke_agent travel", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"}
        ):
            with tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}):
                pass
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_flights",
                "gen_ai.tool.call.arguments": json.dumps(BAD_DATE_ARGS),
                "gen_ai.tool.call.result": json.dumps({"error": {"type": "validation", "message": MESSAGE}}),
            }
            with tracer.start_as_current_span("execute_tool search_flights", attributes=attributes) as span:
                span.set_status(Status(StatusCode.ERROR, MESSAGE))
                context = span.get_span_context()
                ids.update(trace_id=format(context.trace_id, "032x"), span_id=format(context.span_id, "016x"))

    ingest(live_server, project, build)
    return ids["trace_id"], ids["span_id"]


# --- steps ------------------------------------------------------------------------------


def open_failed_call_from_the_explorer(page, base: str, trace_id: str, span_id: str) -> None:
    page.goto(f"{base}/traces/")
    page.get_by_role("link", name=f"Trace {trace_id}, span {span_id}").click()
    expect(page).to_have_url(re.compile(re.escape(f"{base}/traces/{trace_id}/")))
    expect(page.get_by_role("heading", level=1)).to_contain_text(trace_id)


def promote_link(page, span_id: str):
    """The failed call's "Promote to eval case" link on the trace page (its card is titled by tool and span)."""
    call = page.get_by_role("region", name=re.compile(rf"^search_flights\b.*\bspan {span_id}$"))
    return call.get_by_role("link", name="Promote to eval case")


def create_api_token(page, server: str) -> str:
    page.goto(f"{server}/account/tokens/")
    page.get_by_label("Name").fill("CI eval runner")
    page.get_by_role("checkbox", name=re.compile("^runs ")).check()  # the runner's one scope (docs/runner.md)
    page.get_by_role("checkbox", name=re.compile("^read ")).uncheck()
    page.get_by_role("button", name="Create token").click()
    token = page.get_by_role("status").filter(has_text="Your new token").locator("code").inner_text().strip()
    assert re.fullmatch(r"twu_[A-Za-z0-9_-]{43}", token), token
    return token


def run_in_ci(cases: Path, tools: str, label: str, *, server: str, slug: str, token: str) -> subprocess.CompletedProcess:
    """`python -m evals.runner` as a CI job runs it: a fresh process in the user's own directory,
    Toolwatch on PYTHONPATH, the downloaded cases, --post."""
    return subprocess.run(
        [
            sys.executable, "-m", "evals.runner", "--cases", str(cases), "--tools", tools,
            "--url", server, "--project", slug, "--token", token, "--post", "--label", label,
        ],  # fmt: skip
        cwd=cases.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def open_run(page, base: str, label: str):
    page.goto(f"{base}/evals/runs/")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=re.compile(re.escape(label))))
    expect(row).to_have_count(1)
    return row


# --- the flow ---------------------------------------------------------------------------


def test_a_failure_becomes_a_pinned_case_that_ci_runs_and_its_regression_is_alerted(
    logged_in_page, live_server, project, failed_search, webhook, deliveries_sent_at_once, dialogs, tmp_path
):
    page = logged_in_page
    trace_id, span_id = failed_search
    channel, received = webhook
    server, slug = live_server.url, project.slug
    base = f"{server}/p/{slug}"

    # 1-2. From the traces explorer to the trace, then "Promote to eval case" on the failed call.
    open_failed_call_from_the_explorer(page, base, trace_id, span_id)
    promote_link(page, span_id).click()
    expect(page).to_have_url(f"{base}/evals/promote/{trace_id}/{span_id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Promote to eval case")
    # Pre-filled from the failure: a validation error must now name the field and suggest the repair.
    expect(page.get_by_role("radio", name="The call fails, in an actionable way")).to_be_checked()
    expect(page.get_by_label("Error class (when it fails)")).to_have_value("validation")
    expect(page.get_by_role("checkbox", name=re.compile("^field_named:"))).to_be_checked()
    expect(page.get_by_role("checkbox", name=re.compile("^suggestion:"))).to_be_checked()
    expect(page.get_by_label("Next action it must lead to")).to_have_value("repair")
    expect(page.get_by_label("Timeout (seconds)")).to_have_value("30")
    screenshot(page, "eval-promote")
    page.get_by_label("Tags").fill("checkout")
    page.get_by_role("button", name="Promote to eval case").click()

    expect(page).to_have_url(re.compile(re.escape(f"{base}/evals/cases/") + r"\d+/$"))
    case_url = page.url
    case_id = int(case_url.rstrip("/").rsplit("/", 1)[1])
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Eval case #{case_id}: search_flights: validation: {MESSAGE}")
    expect(page.get_by_text(f"Promoted to eval case #{case_id} (draft version 1).")).to_be_visible()
    page.get_by_role("button", name="Pin").click()
    expect(page.get_by_text(re.compile(r"^Pinned version 1 \(sha256:"))).to_be_visible()
    expect(page.get_by_role("button", name="Pin")).to_have_count(0)

    # The hostile message is text on the case page; nothing it carries runs.
    expect(page.locator("main").get_by_text(MESSAGE, exact=True).first).to_be_visible()
    expect(page.locator("main b").filter(has_text=re.compile("^x$"))).to_have_count(0)

    # 3. Export: "Download JSONL" on the cases page gives the pinned version, one line.
    page.goto(f"{base}/evals/")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download JSONL").click()
    cases = tmp_path / download.value.suggested_filename
    download.value.save_as(cases)
    assert cases.name == f"{slug}-eval-cases.jsonl"
    [line] = [json.loads(text) for text in cases.read_text(encoding="utf-8").splitlines()]
    assert (line["schema_version"], line["project"], line["case_id"], line["version"]) == (1, slug, case_id, 1)
    assert (line["tool"], line["arguments"], line["tags"]) == ("search_flights", BAD_DATE_ARGS, ["checkout"])
    assert line["expect"] == {
        "outcome": "error", "error_class": "validation", "contract_checks": ["field_named", "suggestion"],
        "next_action": "repair",
    }  # fmt: skip
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", line["content_hash"])
    assert (line["observed"]["message"], line["observed"]["contract"]["field_named"]) == (MESSAGE, False)

    # 4. A personal API token for CI, made in the browser.
    token = create_api_token(page, server)

    # 5a. CI runs the cases against the fixed tool: exit 0, and the run passed.
    fixed = run_in_ci(cases, FIXED_TOOLS, "ci: date fix", server=server, slug=slug, token=token)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert re.search(rf"^PASS\s+case {case_id} v1\b", fixed.stdout, re.M), fixed.stdout
    row = open_run(page, base, "ci: date fix")
    # Run, started, git, passed, failed, errors, regressions.
    expect(row.get_by_role("cell")).to_have_text([re.compile("ci: date fix"), ANY, ANY, "1", "0", "0", "0"])
    row.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"Eval run #\d+: ci: date fix"))
    expect(page.get_by_text("1 passed, 0 failed, 0 errors")).to_be_visible()
    result = page.get_by_role("row").filter(has_text=f"#{case_id} ")
    expect(result.get_by_text("passed", exact=True)).to_be_visible()
    assert received == []

    # 5b. The bug comes back: exit 1, a regression on the run, the case and the alerts.
    broken = run_in_ci(cases, BROKEN_TOOLS, "ci: refactor", server=server, slug=slug, token=token)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert re.search(rf"^FAIL\s+case {case_id} v1\b", broken.stdout, re.M), broken.stdout
    reasons = [
        "expected class validation, got unknown: Something went wrong",
        "contract check field_named does not apply to an unknown error",
        "contract check suggestion does not apply to an unknown error",
        "expected next action repair, got none (recommended for unknown)",
    ]
    assert all(reason in broken.stdout for reason in reasons), broken.stdout

    row = open_run(page, base, "ci: refactor")
    expect(row.get_by_role("cell")).to_have_text([re.compile("ci: refactor"), ANY, ANY, "0", "1", "0", "1"])
    row.get_by_role("link").click()
    expect(page.get_by_text("0 passed, 1 failed, 0 errors, 1 regression")).to_be_visible()
    result = page.get_by_role("row").filter(has_text=f"#{case_id} ")
    expect(result.get_by_text("failed", exact=True)).to_be_visible()
    expect(result.get_by_text("regression", exact=True)).to_be_visible()
    expect(result.get_by_role("listitem")).to_have_text(reasons)
    screenshot(page, "eval-run-regression")

    result.get_by_role("link", name=re.compile(rf"^#{case_id} ")).click()
    expect(page).to_have_url(case_url)
    expect(page.get_by_text("regression in the last run")).to_be_visible()
    history = page.get_by_role("region", name="Run history")
    expect(history.get_by_role("row").filter(has_text="ci: refactor").get_by_text("regression", exact=True)).to_be_visible()
    expect(history.get_by_role("row").filter(has_text="ci: date fix").get_by_text("passed", exact=True)).to_be_visible()
    screenshot(page, "eval-case-regression")

    page.goto(f"{base}/alerts/")
    alert_row = page.get_by_role("row").filter(has_text="regressed in run ci: refactor")
    expect(alert_row).to_have_count(1)
    expect(alert_row).to_contain_text("search_flights")
    expect(alert_row.get_by_text("open", exact=True)).to_be_visible()
    expect(alert_row).to_contain_text(f"1 eval case of search_flights regressed in run ci: refactor: #{case_id}")
    alert_row.get_by_role("link", name=re.compile("eval_regression|regression", re.I)).click()
    screenshot(page, "eval-regression-alert")
    delivery = page.get_by_role("row").filter(has_text="On-call hook")
    expect(delivery.get_by_text("opened", exact=True)).to_be_visible()
    expect(delivery.get_by_text("sent", exact=True)).to_be_visible()

    # The webhook got the regression, signed with the channel's secret.
    [(headers, body)] = received
    assert verify_signature(channel.secret, body, headers["X-Toolwatch-Signature"])
    sent = json.loads(body)
    assert (sent["event"], sent["alert"]["kind"], sent["alert"]["tool"]) == ("opened", "eval_regression", "search_flights")
    assert [case["case_id"] for case in sent["alert"]["evidence"]["cases"]] == [case_id]

    # 6. Promoting the same failure again lands on the case that exists, and says so.
    open_failed_call_from_the_explorer(page, base, trace_id, span_id)
    promote_link(page, span_id).click()
    expect(page).to_have_url(case_url)
    expect(page.get_by_text(f"This failure was promoted already: it is eval case #{case_id}.")).to_be_visible()

    page.wait_for_load_state("networkidle")
    assert dialogs == []
