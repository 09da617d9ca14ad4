"""The Toolwatch API, as far as the runner needs it, over urllib (no third-party client).

- `Client.fetch_cases(project, status=, tag=)`: the JSONL export of a project's cases;
- `Client.post_run(project, payload)`: an eval run (docs/contract/eval-cases.md#posting-a-run), the server's answer;
- `run_payload(results, …)`: the request body of an eval run.

Both requests carry the REST contract version this runner speaks (`X-Toolwatch-Runner-Contract`,
docs/runner.md#the-rest-contract-version-1); a server that does not speak it answers 400.
Both need a token with the `runs` scope (docs/runner.md#the-token); without it the server answers
403 naming the scope, and the error says which scope the token needs.

Every failure is a `ClientError` whose message says what went wrong and where: the
server's own error for an HTTP error, the network reason otherwise.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from evals.runner import __version__
from evals.runner.execute import CaseResult

# The version of the two requests' shapes (the export read, the run posted) this runner speaks;
# the server answers with the versions it supports in the same header.
CONTRACT_HEADER = "X-Toolwatch-Runner-Contract"
CONTRACT_VERSION = 1
USER_AGENT = (
    f"toolwatch-runner/{__version__} (contract {CONTRACT_VERSION}; "
    f"Python {'.'.join(map(str, sys.version_info[:3]))})"
)
# The one token scope both requests need (a server answers 403 with `required_scope` without it).
RUNNER_SCOPE = "runs"
# The observed keys an eval run carries (docs/contract/eval-cases.md#posting-a-run).
POSTED_OBSERVED_KEYS = ("ok", "error_class", "message", "classified_by", "contract", "next_action", "fingerprint")
_DETAIL_CHARS = 500


class ClientError(Exception):
    """A request to Toolwatch failed; `status` is the HTTP status, None for a network error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Client:
    def __init__(self, base_url: str, token: str, *, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def project_url(self, project: str, path: str) -> str:
        return f"{self.base_url}/api/v1/projects/{urllib.parse.quote(project, safe='')}/{path}"

    def fetch_cases(self, project: str, *, status: str = "pinned", tag: str = "") -> str:
        """The project's cases as JSONL text (the latest pinned version of each active case)."""
        query = {"status": status} | ({"tag": tag} if tag else {})
        url = self.project_url(project, "eval-cases/export.jsonl") + "?" + urllib.parse.urlencode(query)
        body, _ = self._request("GET", url, accept="application/x-ndjson")
        return body.decode("utf-8", errors="replace")

    def post_run(self, project: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Post an eval run; the server's answer (id, url, passed, failed, errors, regressions)."""
        url = self.project_url(project, "eval-runs/")
        body, status = self._request("POST", url, body=json.dumps(payload).encode("utf-8"))
        try:
            answer = json.loads(body)
        except ValueError:
            raise ClientError(f"POST {url} answered {status} with something that is not JSON", status) from None
        if not isinstance(answer, dict):
            raise ClientError(f"POST {url} answered {status} with JSON that is not an object", status)
        return answer

    def _request(self, method: str, url: str, *, body: bytes | None = None, accept: str = "application/json"):
        headers = {
            "Authorization": f"Bearer {self.token}", "Accept": accept, "User-Agent": USER_AGENT,
            CONTRACT_HEADER: str(CONTRACT_VERSION),
        }  # fmt: skip
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read(), response.status
        except urllib.error.HTTPError as exc:
            raise ClientError(_http_error_message(method, url, exc), exc.code) from None
        except urllib.error.URLError as exc:
            raise ClientError(f"cannot reach {url}: {exc.reason}") from None
        except (TimeoutError, OSError) as exc:
            raise ClientError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None


def _http_error_message(method: str, url: str, exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read().decode("utf-8", errors="replace")
    except OSError:
        text = ""
    detail, data = text, None
    try:
        data = json.loads(text)
        detail = json.dumps(data, ensure_ascii=False)
    except ValueError:
        pass
    detail = " ".join(detail.split())[:_DETAIL_CHARS]
    hint = {
        401: " (is the token right? --token or TOOLWATCH_TOKEN)",
        403: " (the token may not reach this project)",
        404: " (no such project for this token, or the server has no eval API at this URL)",
    }.get(exc.code, "")
    scope = data.get("required_scope") if isinstance(data, dict) else None
    if exc.code == 403 and isinstance(scope, str):
        hint = (
            f" (the token lacks the {scope[:20]!r} scope; the runner's token needs the {RUNNER_SCOPE!r} scope, "
            "and nothing more: make one under your name -> API tokens, docs/runner.md#the-token)"
        )
    supported = _contract_versions(exc.headers.get(CONTRACT_HEADER) if exc.headers else None)
    if supported and str(CONTRACT_VERSION) not in supported:
        hint = (
            f" (this runner speaks REST contract {CONTRACT_VERSION}, the server {', '.join(supported)}: "
            "install a toolwatch-runner that speaks one of those)"
        )
    return f"{method} {url} failed with {exc.code} {exc.reason}{hint}" + (f": {detail}" if detail else "")


def _contract_versions(header: str | None) -> list[str]:
    """The versions a server's `X-Toolwatch-Runner-Contract` answer lists ("1", "1, 2")."""
    return [part.strip() for part in (header or "").split(",") if part.strip()]


def run_payload(
    results: Iterable[CaseResult],
    *,
    label: str,
    git_sha: str | None,
    started_at: datetime,
    finished_at: datetime,
) -> dict[str, Any]:
    """The body of `POST …/eval-runs/`. Results the server could not recognise (a line
    without a case id, a content hash that does not match, a case already in the run) are
    left out: they would make it refuse the whole run. They still count locally."""
    posted, seen = [], set()
    for result in results:
        if result.postable and result.case_id is not None and result.version is not None and result.case_id not in seen:
            seen.add(result.case_id)
            posted.append(result)
    return {
        "label": label,
        "git_sha": git_sha,
        "started_at": started_at.isoformat(),
        "finished_at": finished_at.isoformat(),
        "results": [
            {
                "case_id": result.case_id,
                "version": result.version,
                "content_hash": result.content_hash,
                "status": result.status,
                "reasons": list(result.reasons),
                "observed": (
                    {key: result.observed.get(key) for key in POSTED_OBSERVED_KEYS} if result.observed else None
                ),
                "duration_ms": result.duration_ms,
            }
            for result in posted
        ],
    }
