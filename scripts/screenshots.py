#!/usr/bin/env python3
"""Screenshots of every page, from the Quickstart's demo data, into docs/screenshots/.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots] [--chromium /usr/bin/chromium]

It needs the project's .venv (Django, waitress and the `playwright` Python package) and a
Chromium binary (Debian's `chromium` package; Playwright's own browser download is not used).
Nothing in the checkout's database or var/ is touched:

1. a throwaway SQLite database in a temp dir (DATABASE_URL=sqlite:////tmp/…), `manage.py
   migrate`, then `manage.py quickstart` (about 30 days of demo traffic, the login `demo`
   with a printed password, the project `demo-agents` and an open drift alert on search_kb);
2. the app served by waitress on a free loopback port, with DEBUG=1 (static files) and
   Celery tasks run eagerly (no broker);
3. Chromium (headless, 1440x900) logs in and walks the pages: overview, the drifting tool,
   the traces explorer (failed calls) and one failed call's trace, alerts and one alert,
   promoting that call to an eval case, pinning it, two eval runs posted by the real runner
   (`python -m evals.runner --post` with a personal API token: the first passes, the second
   is a regression), ingest health, settings, account tokens and the API docs.
   Each page waits for its charts (`[data-figure][data-drawn]`) before a full-page PNG,
   clipped to the first 2000 px when the full page would be over ~1.5 MB (the API docs always are).

The server is stopped and the temp dir removed at the end, also on failure.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
SLUG = "demo-agents"
DRIFT_TOOL = "search_kb"
VIEWPORT = {"width": 1440, "height": 900}
NARROW = {"width": 1280, "height": 900}  # "readable from 1280 px wide": no page may scroll sideways there
MAX_BYTES = 1_500_000
CLIP_HEIGHT = 2000
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

# A stand-in for the user's tools, for the eval runner: the case promoted here expects
# search_kb to succeed now. TOOLWATCH_SHOTS_BROKEN=1 makes it fail again (a regression).
TOOLS_MODULE = textwrap.dedent(
    '''
    import os

    def search_kb(*args, **kwargs):
        if os.environ.get("TOOLWATCH_SHOTS_BROKEN") == "1":
            raise TimeoutError("knowledge base did not answer within 5 s")
        return {"results": [{"id": "kb-42", "title": "Resetting a password", "score": 0.91}]}

    TOOLS = {"search_kb": search_kb}
    '''
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict, *args: str) -> str:
    done = subprocess.run(
        [str(PYTHON), "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


def wait_for_server(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server at {url} did not answer within {timeout:.0f} s") from None
            time.sleep(0.3)


# Run on every page after its screenshot: controls with no accessible name, and (at 1280 px) how far
# the page overflows sideways. Printed at the end; the screenshots are taken either way.
AUDIT_JS = """() => {
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  const named = el => {
    if (el.getAttribute("aria-label") || el.getAttribute("aria-labelledby") || el.getAttribute("title")) return true;
    if (el.labels && el.labels.length) return true;
    if (["BUTTON", "A", "SUMMARY"].includes(el.tagName)) return el.textContent.trim() !== "";
    return false;
  };
  const selector = ["input:not([type=hidden])", "select", "textarea", "button", "a[href]", "summary"].map(s => "main " + s).join(",");
  const controls = [...document.querySelectorAll(selector)];
  return controls.filter(el => visible(el) && !el.closest(".swagger-ui") && !named(el))
    .map(el => el.outerHTML.slice(0, 120));
}"""


class Shooter:
    """Saves numbered full-page screenshots of a logged-in Chromium page."""

    def __init__(self, page, base: str, out: Path):
        self.page, self.base, self.out = page, base, out
        self.number = 0
        self.problems: list[str] = []

    def audit(self, name: str) -> None:
        page = self.page
        for control in page.evaluate(AUDIT_JS):
            self.problems.append(f"{name}: a control without a label: {control}")
        page.set_viewport_size(NARROW)
        page.wait_for_timeout(300)  # Plotly's responsive relayout
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        page.set_viewport_size(VIEWPORT)
        if overflow > 0 and name != "api-docs":
            self.problems.append(f"{name}: {overflow} px wider than a {NARROW['width']} px window")

    def go(self, path: str) -> None:
        response = self.page.goto(self.base + path, wait_until="networkidle")
        if response is None or response.status >= 400:
            raise RuntimeError(f"GET {path} answered {response.status if response else 'nothing'}")

    def shot(self, name: str, *, max_height: int | None = None) -> Path:
        page = self.page
        page.evaluate("document.activeElement && document.activeElement.blur()")  # no focus ring from filling
        # Every chart draws itself from its JSON once Plotly has loaded; wait until all have.
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-figure]')].every(el => el.hasAttribute('data-drawn'))",
            timeout=20_000,
        )
        page.wait_for_timeout(300)  # Plotly's last relayout
        self.number += 1
        path = self.out / f"{self.number:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True, animations="disabled")
        height = page.evaluate("document.documentElement.scrollHeight")
        if (max_height and height > max_height) or path.stat().st_size > MAX_BYTES:
            page.screenshot(
                path=str(path), full_page=True, animations="disabled",
                clip={"x": 0, "y": 0, "width": VIEWPORT["width"], "height": min(height, max_height or CLIP_HEIGHT)},
            )  # fmt: skip
        print(f"  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  {path.stat().st_size // 1024} KB")
        self.audit(name)
        return path


def walk(shooter: Shooter, *, password: str, env: dict, workdir: Path) -> None:
    page = shooter.page
    base = shooter.base

    shooter.go("/login/")
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", password)
    shooter.shot("login")
    with page.expect_navigation():
        page.click("form [type=submit]")

    shooter.go(f"/p/{SLUG}/?range=7d")
    shooter.shot("overview")
    shooter.go(f"/p/{SLUG}/tools/{DRIFT_TOOL}/?range=7d")
    shooter.shot("tool")

    shooter.go(f"/p/{SLUG}/traces/?range=7d&outcome=failed")
    shooter.shot("traces")

    # A transient search_kb failure: promoting it suggests "the call now succeeds".
    shooter.go(f"/p/{SLUG}/traces/?range=7d&tool={DRIFT_TOOL}&outcome=failed&class=transient")
    link = page.locator("table a[href*='/traces/']").first
    trace_href = link.get_attribute("href")
    shooter.go(trace_href)
    shooter.shot("trace")

    shooter.go(f"/p/{SLUG}/alerts/")
    shooter.shot("alerts")
    alert_href = page.locator("main a[href*='/alerts/']").evaluate_all(
        "links => links.map(a => a.getAttribute('href')).find(h => /\\/alerts\\/\\d+\\/(\\?|$)/.test(h))"
    )
    if not alert_href:
        raise RuntimeError("the alerts page lists no alert to open")
    shooter.go(alert_href)
    shooter.shot("alert")

    shooter.go(trace_href)
    span_id = trace_href.rsplit("#call-", 1)[-1]
    promote = page.locator(f"#call-{span_id} a:has-text('Promote to eval case')")
    if not promote.count():
        promote = page.locator("a:has-text('Promote to eval case')")
    shooter.go(promote.first.get_attribute("href"))
    page.fill("input[name=tags]", "drift, search")
    shooter.shot("promote")
    with page.expect_navigation():
        page.click("form.evalform button[type=submit]")
    case_path = page.url.removeprefix(base)
    with page.expect_navigation():
        page.click("form[action$='/pin/'] button")

    token = manage(
        env, "shell", "-c",
        "from django.contrib.auth import get_user_model; from dashboard.tokens import api_token_create; "
        "print(api_token_create(user=get_user_model().objects.get(username='demo'), name='CI eval runner')[1])",
    ).strip().splitlines()[-1]  # fmt: skip
    (workdir / "shots_tools.py").write_text(TOOLS_MODULE)
    # Two commits of the agent: the first fixes the failure, the second breaks it again (a regression).
    # The temp dir is no git checkout, so the runner labels each run from $GITHUB_SHA, as in CI.
    commits = (("1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d", "0"), ("5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80", "1"))
    for sha, broken in commits:
        subprocess.run(
            [str(PYTHON), "-m", "evals.runner", "--url", base, "--project", SLUG, "--tools", "shots_tools:TOOLS",
             "--post"],
            cwd=workdir, check=False,
            env={**env, "PYTHONPATH": str(ROOT), "TOOLWATCH_TOKEN": token, "GITHUB_SHA": sha,
                 "TOOLWATCH_SHOTS_BROKEN": broken},
        )  # fmt: skip

    shooter.go(case_path)
    shooter.shot("eval-case")
    shooter.go(f"/p/{SLUG}/evals/")
    shooter.shot("eval-cases")
    shooter.go(f"/p/{SLUG}/evals/runs/")
    shooter.shot("eval-runs")
    run_href = page.locator("table a[href*='/evals/runs/']").first.get_attribute("href")
    shooter.go(run_href)
    shooter.shot("eval-run")

    shooter.go(f"/p/{SLUG}/health/?range=7d")
    shooter.shot("health")
    shooter.go(f"/p/{SLUG}/settings/")
    shooter.shot("settings")
    shooter.go("/account/tokens/")
    shooter.shot("tokens")
    shooter.go("/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    shooter.shot("api-docs", max_height=CLIP_HEIGHT)  # the endpoint list goes on for 8000 px


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots", help="where the PNGs go")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium binary")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="toolwatch-shots-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
        "DEBUG": "1",
        "STATIC_ROOT": str(workdir / "static"),
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS": "0",
    }
    server = None
    try:
        print(f"setting up a demo database in {workdir} …", flush=True)
        manage(env, "migrate", "--no-input", "-v", "0")
        setup = manage(env, "quickstart")
        found = re.search(r"login\s+demo / (\S+)", setup)
        if not found:
            raise RuntimeError(f"quickstart printed no password:\n{setup}")
        log = open(workdir / "server.log", "w")  # noqa: SIM115 (closed with the temp dir)
        server = subprocess.Popen(
            [str(PYTHON), "-m", "waitress", f"--listen=127.0.0.1:{port}", "--threads=8", "config.wsgi:application"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_server(base + "/login/")
        print(f"serving on {base}; taking screenshots into {out}", flush=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1, color_scheme="light")
                shooter = Shooter(context.new_page(), base, out)
                walk(shooter, password=found.group(1), env=env, workdir=workdir)
            finally:
                browser.close()
        print(f"{shooter.number} screenshots in {out}")
        for problem in shooter.problems:
            print(f"  check: {problem}")
        if not shooter.problems:
            print(f"  every page fits {NARROW['width']} px and every control has a label")
    except Exception:
        server_log = workdir / "server.log"
        if server_log.exists():
            print("--- the server's log, last lines ---\n" + "\n".join(server_log.read_text().splitlines()[-40:]))
        raise
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
