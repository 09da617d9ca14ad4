"""`python -m evals.runner …` (`python -m toolwatch_runner …` when installed): see evals/runner/cli.py and docs/runner.md."""

import sys

from evals.runner.cli import main

if __name__ == "__main__":
    sys.exit(main())
