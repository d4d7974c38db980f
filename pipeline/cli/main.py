"""CLI: python -m pipeline {run,fetch,search,runs,replay,resume,export,bench,db,docs,mcp} (also the `research` console
script).

Exit 0 ok, 1 failed, 2 usage (an unknown run id included).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from pydantic import ValidationError

from pipeline.cli import bench_command, commands, db_command, docs_command, mcp_command, store_commands
from pipeline.config import ConfigError, Settings
from pipeline.store.base import StoreError

EXIT_USAGE = commands.EXIT_USAGE
HANDLERS: dict[str, Callable[[argparse.Namespace, Settings], int]] = {
    "run": commands.cmd_run, "fetch": commands.cmd_fetch, "search": commands.cmd_search,
    "runs": store_commands.cmd_runs, "replay": store_commands.cmd_replay, "resume": store_commands.cmd_resume,
    "export": store_commands.cmd_export, "bench": bench_command.cmd_bench, "db": db_command.cmd_db,
    "mcp": mcp_command.cmd_mcp, "docs": docs_command.cmd_docs,
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="research",
        description="Verbatim: research answers whose every citation is a verbatim quote from a fetched page.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="research a question and print the report (Markdown)")
    run.add_argument("question", help="the question to research")
    run.add_argument("--mode", choices=["fixed", "tools", "extractive"], default="fixed",
                     help="fixed queries (cheap), tool-calling workers, or extractive: no model at all, sentences "
                          "selected by code, no key needed (default: fixed)")
    run.add_argument("--docs", metavar="DIR", help="research a folder of your own files (PDF, Word, Markdown, HTML, "
                                                   "text); with RESEARCH_SEARCH_PROVIDER set, the web too")
    add_output_args(run)

    fetch = sub.add_parser("fetch", help="one guarded fetch and extraction of URL")
    fetch.add_argument("url")
    fetch.add_argument("--json", action="store_true", help="print the result as JSON")

    search = sub.add_parser("search", help="one search through the configured provider")
    search.add_argument("query")
    search.add_argument("--json", action="store_true", help="print the results as a JSON list")
    search.add_argument("-n", type=int, default=10, help="number of results (default 10)")

    _add_store_commands(sub)
    bench_command.add_parser(sub)
    db_command.add_parser(sub)
    docs_command.add_parser(sub)
    mcp_command.add_parser(sub)
    return p


def add_output_args(parser: argparse.ArgumentParser) -> None:
    """The options every command that produces a RunResult shares: --json PATH and --quiet."""
    parser.add_argument("--json", metavar="PATH", help="also write the RunResult JSON to PATH")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _add_store_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the run-store subcommands on the CLI's subparsers."""
    runs = sub.add_parser("runs", help="list recorded runs, newest first")
    runs.add_argument("--json", action="store_true",
                      help="print a JSON list of {id, date, question, mode, status, cost}")
    runs.add_argument("--limit", type=int, default=None, metavar="N", help="only the N newest runs")

    replay = sub.add_parser("replay", help="re-run a recorded run from the store, with no network")
    replay.add_argument("run_id")
    replay.add_argument("--live-model", action="store_true",
                        help="serve searches and fetches from the store but call the model (judge a prompt change)")
    add_output_args(replay)

    resume = sub.add_parser("resume", help="continue an interrupted run without repeating finished work")
    resume.add_argument("run_id")
    add_output_args(resume)

    export = sub.add_parser("export", help="write a finished run's RunResult JSON (the benchmark_runs/ format)")
    export.add_argument("run_id")
    export.add_argument("path")


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
        handler = HANDLERS[args.command]
        return handler(args, settings)
    except (ConfigError, StoreError) as e:
        print(f"research: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("research: interrupted", file=sys.stderr)
        return 130

