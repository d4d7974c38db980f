"""CLI: python -m pipeline {run,fetch,search,runs,replay,resume,export} (also the `research` console script).

Exit 0 ok, 1 failed, 2 usage (an unknown run id included).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from pydantic import ValidationError

from .cli_runs import HANDLERS as RUN_STORE_HANDLERS
from .cli_runs import add_commands as add_run_store_commands
from .cli_runs import add_output_args
from .config import ConfigError, Settings
from .store import StoreError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="research",
        description="Verbatim: research answers whose every citation is a verbatim quote from a fetched page.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="research a question and print the report (Markdown)")
    run.add_argument("question", help="the question to research")
    run.add_argument("--mode", choices=["fixed", "tools"], default="fixed",
                     help="researcher mode: fixed queries (cheap) or tool-calling workers (default: fixed)")
    add_output_args(run)

    fetch = sub.add_parser("fetch", help="one guarded fetch and extraction of URL")
    fetch.add_argument("url")
    fetch.add_argument("--json", action="store_true", help="print the result as JSON")

    search = sub.add_parser("search", help="one search through the configured provider")
    search.add_argument("query")
    search.add_argument("--json", action="store_true", help="print the results as a JSON list")
    search.add_argument("-n", type=int, default=10, help="number of results (default 10)")

    add_run_store_commands(sub)
    return p


def _cmd_fetch(args: argparse.Namespace, settings: Settings) -> int:
    from .web.fetch import fetch_command_result

    result = fetch_command_result(args.url, settings)
    if args.json:
        print(result.model_dump_json(indent=2))
    elif result.ok:
        print(f"# {result.title or '(no title)'}\n{result.final_url}  {result.published or ''}\n")
        print(result.text or "")
    else:
        print(result.error, file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_FAILED


def _cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from .web.search import SearchFailed, search_command_results

    if args.n < 1:
        print("research search: -n must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        results = search_command_results(args.query, settings, n=args.n)
    except SearchFailed as e:
        print(str(e), file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps([r.model_dump() for r in results], indent=2, ensure_ascii=False))
    elif not results:
        print(f"No results for {args.query!r}.")
    else:
        for i, r in enumerate(results, 1):
            print(f"{i}. {r.title}\n   {r.url}\n   {r.snippet}\n")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from .run import run_cli

    return run_cli(args.question, mode=args.mode, json_path=args.json, quiet=args.quiet, settings=settings)


def _settings() -> Settings:
    """Settings from the environment; an invalid value becomes a ConfigError naming the variable."""
    try:
        return Settings()
    except ValidationError as e:
        err = e.errors()[0]
        field = str(err["loc"][0]) if err.get("loc") else "a setting"
        raise ConfigError(f"invalid environment value for {field}: {err['msg']}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one command, return its exit code; configuration errors are one clear line."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors and 0 on --help
        return int(e.code or 0)
    try:
        settings = _settings()
        handler = {"run": _cmd_run, "fetch": _cmd_fetch, "search": _cmd_search, **RUN_STORE_HANDLERS}[args.command]
        return handler(args, settings)
    except (ConfigError, StoreError) as e:
        print(f"research: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("research: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
