"""plotly.js served from the installed `plotly` package, not from a vendored copy.

The Python package ships the plotly.js bundle its figures are built for, so taking the file
from there keeps the two versions in step on every upgrade. collectstatic copies it to
STATIC_ROOT as vendor/plotly.min.js, and the manifest storage gives it a hashed name that
can be cached for a year (docs/operations.md#static-files).

The file served is the package's with one line put before it, V8's explicit compile hint
(`//# allFunctionsCalledOnLoad`, Chrome 136+; other engines read a comment): Chromium then
compiles all of plotly.js's functions on the thread that streams the script in, instead of
one by one on the main thread as its top level first calls them. In a cold plain Chromium
this cut the bundle's evaluation after its download by about 28 % (median 1.44 s to 1.03 s,
on a loaded machine: docs/benchmarks.md#chart-page-first-load). The hinted copy is written once
per package version, file size and mtime under var/plotly/ (gitignored; the Dockerfile's
collectstatic writes it as root, before /app is handed to the app's user), and everything
that serves the file goes through this finder's storage: collectstatic (so the manifest's
hash is the hinted file's), DEBUG's staticfiles view and whitenoise's finders alike
(tests/test_static_finders.py).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import plotly
from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = "vendor/plotly.min.js"
HINT = b"//# allFunctionsCalledOnLoad\n"  # must be the script's first line
_SOURCE = Path(plotly.__file__).resolve().parent / "package_data"


def _hinted_dir() -> Path:
    """The directory holding the package's plotly.min.js with HINT prepended, written when first needed."""
    source = _SOURCE / "plotly.min.js"
    stat = source.stat()
    directory = Path(settings.BASE_DIR) / "var" / "plotly" / f"{plotly.__version__}-{stat.st_size}-{stat.st_mtime_ns}"
    target = directory / "plotly.min.js"
    if not target.is_file() or target.stat().st_size != len(HINT) + stat.st_size:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, delete=False) as out:  # then renamed: never half written
            out.write(HINT + source.read_bytes())
        os.chmod(out.name, 0o644)
        os.replace(out.name, target)
    return directory


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs):
        self._storage = None

    @property
    def storage(self) -> FileSystemStorage:
        if self._storage is None:
            self._storage = FileSystemStorage(location=_hinted_dir())
            self._storage.prefix = "vendor"  # collectstatic puts the file under vendor/
        return self._storage

    def check(self, **kwargs):
        if not (_SOURCE / "plotly.min.js").is_file():
            return [Error(f"plotly.min.js is missing from the plotly package at {_SOURCE}", id="toolwatch.E001")]
        return []

    def find(self, path, find_all=False, **kwargs):
        found = None
        if path == PLOTLY_JS and (_SOURCE / "plotly.min.js").is_file():  # else the check says so
            found = self.storage.path("plotly.min.js")
        if find_all or kwargs.get("all"):
            return [found] if found else []
        return found

    def list(self, ignore_patterns):
        if (_SOURCE / "plotly.min.js").is_file():
            yield "plotly.min.js", self.storage
