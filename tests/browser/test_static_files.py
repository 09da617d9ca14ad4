"""Static files as production serves them: collectstatic into a fresh STATIC_ROOT with the
manifest storage of config/settings.py, then the whole app (whitenoise in front) on waitress.

plotly.js must come from the plotly package (config/static_finders.py) under a hashed name,
compressed, with a year's cache; a chart page's first load in a cold browser is printed with
where its time goes (the figures in docs/benchmarks.md#chart-page-first-load), not asserted:
timings belong to benchmarks."""

from __future__ import annotations

import gzip
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import plotly
import pytest
from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.db import connections
from django.test import Client, override_settings
from waitress.server import create_server

from config.static_finders import HINT
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, ingest, log_in
from tests.conftest import stop_waitress
from tests.otlp_builders import agent_with_tools

pytestmark = pytest.mark.browser

YEAR = 365 * 24 * 3600
PLOTLY_SOURCE = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"

# Put in every HTML page's head (a classic script: it runs before the body is parsed, to watch every
# frame from the first): notes the frame in which each chart on the first screen first had its
# server-drawn preview (dashboard/charts/preview.py), marks when plotly.js has run and times each
# newPlot, then, once the charts on the first screen and then all charts are drawn, posts the
# page's Navigation, Paint and Resource Timing with them.
PROBE_JS = """(() => {
  "use strict";
  let plotly;
  Object.defineProperty(window, "Plotly", { configurable: true, get: () => plotly, set(value) {
    performance.mark("plotly evaluated");
    const newPlot = value.newPlot;
    value.newPlot = function (el) {
      const start = performance.now();
      try { return newPlot.apply(this, arguments); }
      finally { performance.measure("newPlot " + el.getAttribute("data-figure"), { start }); }
    };
    plotly = value;
  } });
  const onScreen = el => { const box = el.getBoundingClientRect(); return box.bottom > 0 && box.top < innerHeight; };
  const drawn = el => el.hasAttribute("data-drawn");
  const previewed = {};  // chart id: when a frame first had its preview on screen (painted in that frame)
  let screen;
  (function poll() {
    const charts = [...document.querySelectorAll("[data-figure]")];
    for (const el of charts) {
      if (!(el.dataset.figure in previewed) && el.querySelector(":scope > svg.chart-preview") && onScreen(el))
        previewed[el.dataset.figure] = performance.now();
    }
    // A page without charts (the login form, the tokens page): nothing to report, once it is parsed.
    if (!charts.length) return document.readyState === "loading" ? requestAnimationFrame(poll) : undefined;
    if (screen === undefined && charts.filter(onScreen).every(drawn)) screen = performance.now();
    if (screen === undefined || !charts.every(drawn)) return requestAnimationFrame(poll);
    const nav = performance.getEntriesByType("navigation")[0];
    const js = performance.getEntriesByType("resource").find(e => e.name.includes("/vendor/plotly.min."));
    const first = charts.filter(onScreen).map(el => previewed[el.dataset.figure]);
    const probe = performance.getEntriesByType("resource").find(e => e.name.includes("/__probe/probe.js"));
    const fcp = performance.getEntriesByName("first-contentful-paint")[0];
    const css = performance.getEntriesByType("resource").find(e => e.name.includes("/css/toolwatch."));
    fetch("/__probe/report", { method: "POST", body: JSON.stringify({
      previews: first.every(t => t !== undefined) ? Math.max(...first) : null, fcp: fcp && fcp.startTime,
      probe: probe && probe.responseEnd - probe.startTime, css: css && css.responseEnd,
      screen, every: performance.now(), server: nav.responseStart - nav.requestStart, html: nav.responseEnd,
      plotly_start: js.startTime, plotly_end: js.responseEnd, plotly_transfer: js.transferSize, plotly_decoded:
      js.decodedBodySize, plotly_evaluated: performance.getEntriesByName("plotly evaluated")[0].startTime,
      draws: performance.getEntriesByType("measure").map(m => [m.name.slice(8), m.startTime, m.duration]),
    }) });
  })();
})();
"""


class Probe:
    """The app with PROBE_JS in its pages (a script of its own origin, so the CSP allows it) and
    the endpoint it reports to; with `cookie` set, every request carries it (a session, for a
    browser that cannot log in through the form)."""

    def __init__(self, app):
        self.app, self.cookie, self.reports = app, None, queue.Queue()

    def __call__(self, environ, start_response):
        if environ["PATH_INFO"] == "/__probe/probe.js":
            start_response("200 OK", [("Content-Type", "text/javascript")])
            return [PROBE_JS.encode()]
        if environ["PATH_INFO"] == "/__probe/start":  # lets a browser just started settle before the page is opened
            start_response("200 OK", [("Content-Type", "text/html")])
            return [b'<meta http-equiv="refresh" content="1; url=' + environ["QUERY_STRING"].encode() + b'">']
        if environ["PATH_INFO"] == "/__probe/report":
            self.reports.put(json.loads(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))))
            start_response("204 No Content", [])
            return []
        if self.cookie:
            environ["HTTP_COOKIE"] = self.cookie
        captured = {}
        response = self.app(environ, lambda status, headers, exc_info=None: captured.update(s=status, h=headers))
        try:
            body = b"".join(response)
        finally:
            response.close()  # what the server would call: Django's request_finished
            connections.close_all()  # this server thread's: the test database is dropped at the end
        headers = captured["h"]
        if any(k.lower() == "content-type" and v.startswith("text/html") for k, v in headers):
            body = body.replace(b"</head>", b'<script src="/__probe/probe.js"></script></head>', 1)
            headers = [(k, str(len(body)) if k.lower() == "content-length" else v) for k, v in headers]
        start_response(captured["s"], headers)
        return [body]

    def report(self) -> dict:
        return self.reports.get(timeout=30)

    def visit_in_plain_chromium(self, base_url: str, path: str) -> dict:
        """Open path in a Chromium of its own (a fresh profile: a cold cache), no DevTools client attached."""
        url = f"{base_url}/__probe/start?{path}"
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
            browser = subprocess.Popen(
                [CHROMIUM, *CHROMIUM_ARGS, f"--user-data-dir={profile}", "--window-size=1280,800", url],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            try:
                return self.report()
            finally:
                os.killpg(browser.pid, signal.SIGTERM)  # its own group: the renderer and GPU processes too
                browser.wait(timeout=10)


@pytest.fixture
def production_static(tmp_path):
    """The app served by waitress after a real collectstatic with the settings' own storage."""
    storages = {**settings.STORAGES, "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}
    with override_settings(STATIC_ROOT=tmp_path / "static", STORAGES=storages, WHITENOISE_AUTOREFRESH=False):
        call_command("collectstatic", interactive=False, verbosity=0)
        probe = Probe(WSGIHandler())  # whitenoise reads STATIC_ROOT now
        server = create_server(probe, host="127.0.0.1", port=0, threads=4)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        yield SimpleNamespace(url=f"http://127.0.0.1:{server.effective_port}", root=tmp_path / "static", probe=probe)
        stop_waitress(server, thread)


def _get(url: str, **headers: str):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
        return response.status, dict(response.headers), response.read()


def test_plotly_js_is_the_plotly_packages_own_file_under_a_hashed_name(production_static):
    name = staticfiles_storage.stored_name("vendor/plotly.min.js")
    assert name.startswith("vendor/plotly.min.") and name != "vendor/plotly.min.js"
    # The package's file with V8's compile hint as its first line (config/static_finders.py), and nothing else changed.
    assert (production_static.root / name).read_bytes() == HINT + PLOTLY_SOURCE.read_bytes()
    assert not (Path(settings.BASE_DIR) / "static" / "vendor" / "plotly.min.js").exists(), "no vendored copy"


def test_hashed_files_are_sent_compressed_and_cached_for_a_year(production_static):
    url = production_static.url + staticfiles_storage.url("vendor/plotly.min.js")
    status, headers, body = _get(url, **{"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert len(body) < PLOTLY_SOURCE.stat().st_size / 3, "compressed to a fraction of its 4.6 MB"
    assert gzip.decompress(body) == HINT + PLOTLY_SOURCE.read_bytes()
    cache = dict(part.strip().partition("=")[::2] for part in headers["Cache-Control"].split(","))
    assert int(cache["max-age"]) >= YEAR and "immutable" in cache

    for asset in ("css/toolwatch.css", "js/charts.js"):
        _, headers, _ = _get(production_static.url + staticfiles_storage.url(asset))
        assert "immutable" in headers["Cache-Control"], asset


def test_a_chart_pages_first_load_in_a_cold_browser(production_static, page, owner, project):
    ingest(production_static, project, lambda tracer: agent_with_tools(tracer, tools=[
        {"name": "lookup_order", "error": TimeoutError("upstream timed out after 30 s")},
        {"name": "search_kb"},
    ]))  # fmt: skip
    path = f"/p/{project.slug}/tools/lookup_order/"
    # To a page without charts: the overview would load plotly.js, and the cache would not be cold.
    log_in(page, production_static, owner.get_username(), next_path="/account/tokens/")
    page.wait_for_url(lambda url: "/login/" not in url)

    page.goto(production_static.url + path, wait_until="commit")  # the probe's report says when it is drawn
    driven = production_static.probe.report()
    # The same page in a Chromium no DevTools client is attached to, as a person's browser is. Playwright's (its
    # Runtime domain) has V8 record stacks with source positions, and for plotly.js's bundle V8 reparses huge
    # functions to find them: in a trace, 1 s of its 2 s evaluation (docs/benchmarks.md#chart-page-first-load).
    client = Client()
    client.force_login(owner)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    production_static.probe.cookie = f"{settings.SESSION_COOKIE_NAME}={session}"
    plain = production_static.probe.visit_in_plain_chromium(production_static.url, path)
    for name, figures in (("Playwright-driven", driven), ("plain Chromium", plain)):
        print(f"\nchart page first load (cold cache, loopback), {name}: {_breakdown(figures)}")
    for figures in (driven, plain):
        assert 0 < figures["plotly_transfer"] < figures["plotly_decoded"] / 3  # fetched (cold), and compressed
        assert figures["previews"] is not None, "the first screen's charts have their server-drawn previews"
        assert figures["previews"] < figures["plotly_evaluated"], "the previews are drawn with the HTML"

    page.reload(wait_until="commit")
    again = production_static.probe.report()
    assert again["plotly_transfer"] == 0, "the second load reads plotly.js from the browser's cache"


def _breakdown(f: dict) -> str:
    draws = " + ".join(f"{duration:.0f}" for _, _, duration in f["draws"])
    # Painted: in the first frame that had them, unless the page's first paint came later (a frame can run before
    # the first paint, held for a same-origin navigation); the probe's fetch holds the parser up by its time.
    previews = "no previews" if f["previews"] is None else f"previews painted at {max(f['previews'], f['fcp']):.0f} ms"
    return (
        f"first screen's {previews} (in a frame at {f['previews'] or 0:.0f}, first contentful paint {f['fcp']:.0f};"
        f" the probe's own fetch {f['probe']:.0f}, the CSS in by {f['css'] or 0:.0f}),"
        f" plotly.js evaluated at {f['plotly_evaluated']:.0f}, charts interactive at {f['screen']:.0f} ms,"
        f" all {len(f['draws'])} at {f['every']:.0f} ms"
        f" | HTML: server {f['server']:.0f} ms, received by {f['html']:.0f}"
        f" | plotly.js ({f['plotly_transfer'] / 1e6:.2f} MB sent for {f['plotly_decoded'] / 1e6:.2f} MB):"
        f" fetched {f['plotly_start']:.0f}-{f['plotly_end']:.0f}, evaluated by {f['plotly_evaluated']:.0f}"
        f" | newPlot from {f['draws'][0][1]:.0f}: {draws} ms | load average {os.getloadavg()[0]:.1f}"
    )
