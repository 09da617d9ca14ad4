"""`python -m evals.runner …`: see evals/runner/cli.py and docs/runner.md."""

import sys

from evals.runner.cli import main

sys.exit(main())
