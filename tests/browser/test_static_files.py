"""Static files as production serves them: collectstatic into a fresh STATIC_ROOT with the
manifest storage of config/settings.py, then the whole app (whitenoise in front) on waitress.

plotly.js must come from the plotly package (config/static_finders.py) under a hashed name,
compressed, with a year's cache; a chart page's first load in a cold browser is printed
(the figure in docs/benchmarks.md), not asserted: timings belong to benchmarks."""

from __future__ import annotations

import gzip
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import plotly
import pytest
from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.test import override_settings
from waitress.server import create_server

from tests.browser.conftest import ingest, log_in
from tests.otlp_builders import agent_with_tools

pytestmark = pytest.mark.browser

YEAR = 365 * 24 * 3600
PLOTLY_SOURCE = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


@pytest.fixture
def production_static(tmp_path):
    """The app served by waitress after a real collectstatic with the settings' own storage."""
    storages = {**settings.STORAGES, "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}
    with override_settings(STATIC_ROOT=tmp_path / "static", STORAGES=storages, WHITENOISE_AUTOREFRESH=False):
        call_command("collectstatic", interactive=False, verbosity=0)
        server = create_server(WSGIHandler(), host="127.0.0.1", port=0, threads=4)  # whitenoise reads STATIC_ROOT now
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        yield SimpleNamespace(url=f"http://127.0.0.1:{server.effective_port}", root=tmp_path / "static")
        server.close()
        thread.join(timeout=5)


def _get(url: str, **headers: str):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
        return response.status, dict(response.headers), response.read()


def test_plotly_js_is_the_plotly_packages_own_file_under_a_hashed_name(production_static):
    name = staticfiles_storage.stored_name("vendor/plotly.min.js")
    assert name.startswith("vendor/plotly.min.") and name != "vendor/plotly.min.js"
    assert (production_static.root / name).read_bytes() == PLOTLY_SOURCE.read_bytes()
    assert not (Path(settings.BASE_DIR) / "static" / "vendor" / "plotly.min.js").exists(), "no vendored copy"


def test_hashed_files_are_sent_compressed_and_cached_for_a_year(production_static):
    url = production_static.url + staticfiles_storage.url("vendor/plotly.min.js")
    status, headers, body = _get(url, **{"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert len(body) < PLOTLY_SOURCE.stat().st_size / 3, "compressed to a fraction of its 4.6 MB"
    assert gzip.decompress(body) == PLOTLY_SOURCE.read_bytes()
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
    # To a page without charts: the overview would load plotly.js, and the cache would not be cold.
    log_in(page, production_static, owner.get_username(), next_path="/account/tokens/")
    page.wait_for_url(lambda url: "/login/" not in url)

    started = time.perf_counter()
    page.goto(f"{production_static.url}/p/{project.slug}/tools/lookup_order/")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length > 0")
    first_load = time.perf_counter() - started
    plotly_entry = page.evaluate(
        "() => performance.getEntriesByType('resource').filter(e => e.name.includes('/vendor/plotly.min.'))"
        ".map(e => ({transfer: e.transferSize, decoded: e.decodedBodySize}))[0]"
    )
    print(f"\nchart page first load (cold cache, loopback): {first_load * 1000:.0f} ms; plotly.js "
          f"{plotly_entry['transfer'] / 1e6:.2f} MB sent for {plotly_entry['decoded'] / 1e6:.2f} MB")  # fmt: skip
    assert 0 < plotly_entry["transfer"] < plotly_entry["decoded"] / 3  # fetched (cold), and compressed

    page.reload()
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length > 0")
    again = page.evaluate(
        "() => performance.getEntriesByType('resource').filter(e => e.name.includes('/vendor/plotly.min.'))"
        ".map(e => e.transferSize)[0]"
    )
    assert again == 0, "the second load reads plotly.js from the browser's cache"
