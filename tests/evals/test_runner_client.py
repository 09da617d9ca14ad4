"""evals.runner.client, and the CLI's --url / --post, against a tiny loopback Toolwatch.

The fake server checks every posted run against the body shape of docs/contract/eval-cases.md#posting-a-run and
answers as the contract says (201 with counts, 400 naming the bad field).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evals.runner import __version__, cli
from evals.runner.client import Client, ClientError, run_payload
from evals.runner.execute import CaseResult
from tests.evals.sample_tools import case_line, flights_cases

TOKEN = "tw_pat_test"
FIXED = "tests.evals.sample_tools.flights_fixed:TOOLS"
BROKEN = "tests.evals.sample_tools.flights_broken:TOOLS"
RESULT_KEYS = {"case_id", "version", "content_hash", "status", "reasons", "observed", "duration_ms"}
OBSERVED_KEYS = {"ok", "error_class", "message", "classified_by", "contract", "next_action", "fingerprint"}


def contract_problems(body) -> list[str]:
    """What in a posted eval run does not follow docs/contract/eval-cases.md#posting-a-run."""
    problems = []
    if set(body) != {"label", "git_sha", "started_at", "finished_at", "results"}:
        return [f"top-level keys {sorted(body)}"]
    if not isinstance(body["label"], str) or not body["label"]:
        problems.append("label")
    if body["git_sha"] is not None and not isinstance(body["git_sha"], str):
        problems.append("git_sha")
    for name in ("started_at", "finished_at"):
        try:
            dt.datetime.fromisoformat(body[name])
        except (TypeError, ValueError):
            problems.append(name)
    for index, result in enumerate(body["results"]):
        where = f"results[{index}]"
        if set(result) != RESULT_KEYS:
            problems.append(f"{where} keys {sorted(result)}")
            continue
        if not (isinstance(result["case_id"], int) and isinstance(result["version"], int)):
            problems.append(f"{where}.case_id/version")
        if not str(result["content_hash"]).startswith("sha256:") or len(result["content_hash"]) != 71:
            problems.append(f"{where}.content_hash")
        if result["status"] not in ("passed", "failed", "error"):
            problems.append(f"{where}.status")
        if not (isinstance(result["reasons"], list) and all(isinstance(r, str) for r in result["reasons"])):
            problems.append(f"{where}.reasons")
        if result["observed"] is not None and set(result["observed"]) != OBSERVED_KEYS:
            problems.append(f"{where}.observed keys {sorted(result['observed'])}")
        if not isinstance(result["duration_ms"], int):
            problems.append(f"{where}.duration_ms")
    return problems


class FakeToolwatch(ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict] = []
        self.export = ""
        self.previous: dict[int, str] = {}  # case id -> status of the last run, for regressions
        self.answer_status: int | None = None  # force an error answer
        self.contracts: str | None = None  # answer as a server speaking only these contract versions ("2")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: FakeToolwatch

    def log_message(self, *args):  # keep the test output clean
        pass

    def _record(self, body: bytes) -> dict:
        parsed = urllib.parse.urlsplit(self.path)
        request = {
            "method": self.command, "path": parsed.path, "query": urllib.parse.parse_qs(parsed.query),
            "headers": dict(self.headers), "body": body,
        }  # fmt: skip
        self.server.requests.append(request)
        return request

    def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if self.server.contracts:
            self.send_header("X-Toolwatch-Runner-Contract", self.server.contracts)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse_contract(self, request: dict) -> bool:
        sent = request["headers"].get("X-Toolwatch-Runner-Contract", "1")
        if self.server.contracts and sent not in self.server.contracts.split(", "):
            message = f"runner contract version {sent!r} is not supported; this server supports {self.server.contracts}"
            self._answer(400, json.dumps({"X-Toolwatch-Runner-Contract": [message]}).encode())
            return True
        return False

    def do_GET(self):
        request = self._record(b"")
        if self._refuse_contract(request):
            return None
        if request["headers"].get("Authorization") != f"Bearer {TOKEN}":
            return self._answer(401, b'{"detail": "Invalid token."}')
        if request["path"] != "/api/v1/projects/shop/eval-cases/export.jsonl":
            return self._answer(404, b'{"detail": "Not found."}')
        self._answer(200, self.server.export.encode(), "application/x-ndjson")

    def do_POST(self):
        request = self._record(self.rfile.read(int(self.headers["Content-Length"])))
        if self._refuse_contract(request):
            return None
        if self.server.answer_status:
            return self._answer(self.server.answer_status, b'{"results": ["unknown case id 99"]}')
        if request["path"] != "/api/v1/projects/shop/eval-runs/":
            return self._answer(404, b'{"detail": "Not found."}')
        body = json.loads(request["body"])
        if problems := contract_problems(body):
            return self._answer(400, json.dumps({"problems": problems}).encode())
        statuses = [r["status"] for r in body["results"]]
        regressions = [
            r["case_id"] for r in body["results"] if r["status"] != "passed" and self.server.previous.get(r["case_id"]) == "passed"
        ]
        self.server.previous.update({r["case_id"]: r["status"] for r in body["results"]})
        answer = {
            "id": len(self.server.requests), "url": f"/p/shop/evals/runs/{len(self.server.requests)}/",
            "passed": statuses.count("passed"), "failed": statuses.count("failed"), "errors": statuses.count("error"),
            "regressions": regressions,
        }  # fmt: skip
        self._answer(201, json.dumps(answer).encode())


@pytest.fixture
def server():
    fake = FakeToolwatch()
    # A short poll: shutdown() waits for the loop's next look, 0.5 s by default.
    thread = threading.Thread(target=fake.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


@pytest.fixture
def cases_file(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in flights_cases()) + "\n", encoding="utf-8")
    return path


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# --- the client -----------------------------------------------------------------------------------


def test_cases_are_fetched_from_the_export_with_the_token_and_filters(server):
    server.export = case_line(1, "search_flights") + "\n"
    text = Client(server.url + "/", TOKEN).fetch_cases("shop", tag="checkout")
    assert text == server.export
    [request] = server.requests
    assert request["query"] == {"status": ["pinned"], "tag": ["checkout"]}
    assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert request["headers"]["Accept"] == "application/x-ndjson"


def test_both_requests_name_the_rest_contract_version_and_the_runners_version(server, cases_file):
    server.export = case_line(1, "search_flights") + "\n"
    client = Client(server.url, TOKEN)
    client.fetch_cases("shop")
    client.post_run("shop", {"label": "x", "git_sha": None, "started_at": "2026-01-01T00:00:00+00:00",
                             "finished_at": "2026-01-01T00:00:01+00:00", "results": []})  # fmt: skip
    for request in server.requests:
        assert request["headers"]["X-Toolwatch-Runner-Contract"] == "1"
        assert request["headers"]["User-Agent"].startswith(f"toolwatch-runner/{__version__} (contract 1; Python 3.")


def test_a_server_that_speaks_another_contract_version_says_so_and_which(server, cases_file):
    server.contracts = "2, 3"
    with pytest.raises(ClientError) as caught:
        Client(server.url, TOKEN).fetch_cases("shop")
    assert caught.value.status == 400
    assert "(this runner speaks REST contract 1, the server 2, 3: install a toolwatch-runner that speaks one of those)" in str(caught.value)
    assert "this server supports 2, 3" in str(caught.value)

    code, out, err = run_cli(
        "--cases", str(cases_file), "--tools", FIXED, "--post", "--url", server.url, "--project", "shop", "--token", TOKEN
    )
    assert code == cli.EXIT_NOT_POSTED and "2 cases: 2 passed" in out
    assert "the server 2, 3: install a toolwatch-runner" in err


def test_a_refused_token_is_an_error_that_says_so(server):
    with pytest.raises(ClientError) as caught:
        Client(server.url, "wrong").fetch_cases("shop")
    assert caught.value.status == 401
    assert "failed with 401 Unauthorized (is the token right? --token or TOOLWATCH_TOKEN)" in str(caught.value)
    assert "Invalid token." in str(caught.value)


def test_an_unreachable_server_is_an_error_naming_the_url():
    with pytest.raises(ClientError) as caught:
        Client("http://127.0.0.1:9", TOKEN, timeout_s=2).post_run("shop", {})
    assert caught.value.status is None
    assert str(caught.value).startswith("cannot reach http://127.0.0.1:9/api/v1/projects/shop/eval-runs/")


def test_the_run_payload_follows_the_contract_and_leaves_out_unrecognisable_results():
    results = [
        CaseResult("case 1 v2", "t", "passed", [], 1, 2, "sha256:" + "a" * 64, observed={"ok": True, "extra": 1, "error_class": None}),
        CaseResult("line 3", "", "error", ["line 3: not valid JSON"], postable=False),
        CaseResult("case 4 v1", "t", "error", ["timed out after 1 s"], 4, 1, "sha256:" + "b" * 64),
        CaseResult("case 4 v2", "t", "passed", [], 4, 2, "sha256:" + "c" * 64),  # the server takes a case once per run
    ]
    now = dt.datetime(2026, 1, 31, 12, tzinfo=dt.UTC)
    payload = run_payload(results, label="git:abc1234", git_sha="abc1234def", started_at=now, finished_at=now)
    assert contract_problems(payload) == []
    assert [r["case_id"] for r in payload["results"]] == [1, 4]
    assert payload["results"][0]["observed"]["ok"] is True and "extra" not in payload["results"][0]["observed"]
    assert payload["results"][1]["observed"] is None


# --- the CLI against the server -----------------------------------------------------------------------


def test_a_run_is_posted_and_the_servers_answer_printed(server, cases_file):
    code, out, err = run_cli(
        "--cases", str(cases_file), "--tools", FIXED, "--post", "--url", server.url, "--project", "shop",
        "--token", TOKEN, "--label", "nightly",
    )  # fmt: skip
    assert (code, err) == (0, "")
    [request] = server.requests
    assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
    body = json.loads(request["body"])
    assert body["label"] == "nightly"
    assert [(r["case_id"], r["version"], r["status"]) for r in body["results"]] == [(1, 2, "passed"), (2, 1, "passed")]
    assert f"posted run 1: 2 passed, 0 failed, 0 errors; no regressions\n{server.url}/p/shop/evals/runs/1/" in out


def test_a_regression_reported_by_the_server_is_printed(server, cases_file, monkeypatch):
    monkeypatch.setenv("TOOLWATCH_TOKEN", TOKEN)
    flags = ["--cases", str(cases_file), "--post", "--url", server.url, "--project", "shop"]
    assert run_cli(*flags, "--tools", FIXED)[0] == 0
    code, out, _ = run_cli(*flags, "--tools", BROKEN)
    assert code == 1
    assert "posted run 2: 0 passed, 2 failed, 0 errors; regressions: case 1, case 2" in out


def test_the_default_label_is_the_git_sha(server, cases_file, monkeypatch):
    monkeypatch.setattr(cli, "_git", lambda *args: "3f2c1a9e" + "0" * 32)
    run_cli("--cases", str(cases_file), "--tools", FIXED, "--post", "--url", server.url, "--project", "shop", "--token", TOKEN)
    body = json.loads(server.requests[0]["body"])
    assert (body["label"], body["git_sha"]) == ("git:3f2c1a9", "3f2c1a9e" + "0" * 32)


def test_outside_git_the_label_is_a_timestamp(server, cases_file, monkeypatch):
    monkeypatch.setattr(cli, "_git", lambda *args: "")
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    run_cli("--cases", str(cases_file), "--tools", FIXED, "--post", "--url", server.url, "--project", "shop", "--token", TOKEN)
    body = json.loads(server.requests[0]["body"])
    assert body["label"].startswith("run ") and body["label"].endswith(" UTC")
    assert body["git_sha"] is None


def test_a_refused_post_still_prints_the_results_and_exits_3(server, cases_file):
    server.answer_status = 400
    code, out, err = run_cli(
        "--cases", str(cases_file), "--tools", FIXED, "--post", "--url", server.url, "--project", "shop", "--token", TOKEN
    )
    assert code == cli.EXIT_NOT_POSTED
    assert "2 cases: 2 passed, 0 failed, 0 errors" in out
    assert "error: the run was not posted: POST " in err and "failed with 400 Bad Request" in err
    assert "unknown case id 99" in err


def test_an_unreachable_server_still_prints_the_results_and_exits_3(cases_file):
    code, out, err = run_cli(
        "--cases", str(cases_file), "--tools", BROKEN, "--post", "--url", "http://127.0.0.1:9", "--project", "shop",
        "--token", TOKEN,
    )  # fmt: skip
    assert code == 3
    assert "FAIL  case 1 v2" in out
    assert "error: the run was not posted: cannot reach http://127.0.0.1:9/" in err


def test_cases_can_come_from_the_api(server):
    server.export = "\n".join(json.dumps(c) for c in flights_cases()) + "\n"
    code, out, _ = run_cli("--url", server.url, "--project", "shop", "--token", TOKEN, "--tools", FIXED, "--tag", "checkout")
    assert code == 0
    assert "2 cases: 2 passed" in out
    assert server.requests[0]["query"]["tag"] == ["checkout"]


def test_cases_that_cannot_be_fetched_stop_the_run_with_exit_2(server):
    code, _, err = run_cli("--url", server.url, "--project", "nope", "--token", TOKEN, "--tools", FIXED)
    assert code == 2
    assert "error: cannot load the cases: GET " in err and "failed with 404" in err
