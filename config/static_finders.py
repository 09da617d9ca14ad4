"""plotly.js served from the installed `plotly` package, not from a vendored copy.

The Python package ships the plotly.js bundle its figures are built for, so taking the file
from there keeps the two versions in step on every upgrade. collectstatic copies it to
STATIC_ROOT as vendor/plotly.min.js, and the manifest storage gives it a hashed name that
can be cached for a year (docs/operations.md#static-files).
"""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = "vendor/plotly.min.js"
_SOURCE = Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs):
        self.storage = FileSystemStorage(location=_SOURCE)
        self.storage.prefix = "vendor"  # collectstatic puts the file under vendor/

    def check(self, **kwargs):
        if not (_SOURCE / "plotly.min.js").is_file():
            return [Error(f"plotly.min.js is missing from the plotly package at {_SOURCE}", id="toolwatch.E001")]
        return []

    def find(self, path, find_all=False, **kwargs):
        found = str(_SOURCE / "plotly.min.js") if path == PLOTLY_JS else None
        if find_all or kwargs.get("all"):
            return [found] if found else []
        return found

    def list(self, ignore_patterns):
        yield "plotly.min.js", self.storage
