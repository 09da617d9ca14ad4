"""config/static_finders.py: plotly.js is the plotly package's own file with V8's compile hint as
its first line, and every way of serving it (collectstatic, DEBUG's view, whitenoise's finders)
gives the same bytes."""

from __future__ import annotations

from pathlib import Path

import plotly
import pytest
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.views import serve
from django.test import RequestFactory, override_settings
from whitenoise.middleware import WhiteNoiseMiddleware

from config import static_finders
from config.static_finders import HINT, PLOTLY_JS, PlotlyFinder

PACKAGE_FILE = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def test_the_hint_is_v8s_magic_comment_on_a_line_of_its_own():
    assert HINT == b"//# allFunctionsCalledOnLoad\n"


def test_the_finder_gives_the_package_file_with_exactly_the_hint_line_prepended():
    found = Path(finders.find(PLOTLY_JS))
    assert found.read_bytes() == HINT + PACKAGE_FILE.read_bytes()
    assert found.parent.name.startswith(plotly.__version__ + "-"), "versioned with the package"
    [(name, storage)] = PlotlyFinder().list(None)
    assert (name, storage.prefix) == ("plotly.min.js", "vendor")
    assert Path(storage.path(name)) == found


def _body(response) -> bytes:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    response.close()
    return content


@pytest.mark.django_db  # closing a response sends request_finished, which closes the database connections
@override_settings(DEBUG=True)
def test_debug_serving_and_whitenoises_finders_give_the_same_bytes():
    expected = HINT + PACKAGE_FILE.read_bytes()
    assert _body(serve(RequestFactory().get("/static/" + PLOTLY_JS), PLOTLY_JS)) == expected
    for autorefresh in (False, True):  # the finders listed once at start, or asked per request
        with override_settings(WHITENOISE_USE_FINDERS=True, WHITENOISE_AUTOREFRESH=autorefresh):
            middleware = WhiteNoiseMiddleware(get_response=lambda request: pytest.fail("not served by whitenoise"))
            assert _body(middleware(RequestFactory().get("/static/" + PLOTLY_JS))) == expected


def test_the_check_reports_a_package_without_plotly_js(tmp_path, monkeypatch):
    assert PlotlyFinder().check() == []
    monkeypatch.setattr(static_finders, "_SOURCE", tmp_path)
    [error] = PlotlyFinder().check()
    assert error.id == "toolwatch.E001"
    assert PlotlyFinder().find(PLOTLY_JS) is None and list(PlotlyFinder().list(None)) == []
