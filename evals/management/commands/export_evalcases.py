"""`python manage.py export_evalcases SLUG [--tag T] [--tool T] [-o FILE]`: the JSONL export, from the shell."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from evals import exporters, selectors
from ingest.models import Project


class Command(BaseCommand):
    help = "Write the latest pinned version of each active eval case of a project as JSONL (docs/evals.md)."

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project's slug")
        parser.add_argument("--tag", default="", help="only cases with this tag")
        parser.add_argument("--tool", default="", help="only cases of this tool")
        parser.add_argument("-o", "--output", default="-", help="a file to write (default: standard output)")

    def handle(self, *args, project, tag, tool, output, **options):
        found = Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"no project with the slug {project!r}")
        records = selectors.export_records(found, selectors.CaseFilters(tag=tag.lower(), tool=tool))
        stream = sys.stdout if output == "-" else open(output, "w", encoding="utf-8")  # noqa: SIM115
        try:
            stream.writelines(exporters.jsonl_lines(records))
        finally:
            if stream is not sys.stdout:
                stream.close()
        self.stderr.write(f"{len(records)} case{'s' if len(records) != 1 else ''} exported")
