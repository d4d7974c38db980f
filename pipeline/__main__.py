"""`python -m pipeline`: the command line (pipeline/cli/main.py)."""
from pipeline.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
