"""CLI commands that research, fetch and search, and how a RunResult is printed and saved."""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from pipeline.cli.docs_command import open_index
from pipeline.cli.progress import StderrProgress
from pipeline.config import ConfigError, Settings
from pipeline.core.budget import Budget
from pipeline.core.schema import BudgetLimits, RunOptions, RunResult, SearchResult
from pipeline.models.base import LLMError
from pipeline.models.factory import model_client
from pipeline.research import preflight
from pipeline.research.orchestrator import RunNotRecorded, new_run_id, research
from pipeline.store import open_store
from pipeline.web.fetch import Fetcher
from pipeline.web.search.anthropic import ServerWebSearch
from pipeline.web.search.service import SearchFailed, make_provider, unique_results

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def search_results(query: str, settings: Settings, n: int = 10) -> list[SearchResult]:
    """One search with production defaults: `python -m pipeline search QUERY`. Raises SearchFailed/ConfigError."""
    provider = make_provider(settings, server_web_search=_one_off_model_search(settings), model_errors=(LLMError,))
    return unique_results(provider.search(query, n=n))[:n]


def _one_off_model_search(settings: Settings) -> ServerWebSearch:
    """The model's server-side search for one CLI search, on its own model client with default budget limits."""
    def search(query: str, n: int, recency_days: int | None) -> list[dict[str, Any]]:
        return model_client(settings, Budget(BudgetLimits(), settings.price)).server_web_search(query, n, recency_days)
    return search


def cmd_fetch(args: argparse.Namespace, settings: Settings) -> int:
    result = Fetcher(settings).fetch(args.url)
    if args.json:
        print(result.model_dump_json(indent=2))
    elif result.ok:
        print(f"# {result.title or '(no title)'}\n{result.final_url}  {result.published or ''}\n")
        print(result.text or "")
    else:
        print(result.error, file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_FAILED


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    if args.n < 1:
        print("research search: -n must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        results = search_results(args.query, settings, n=args.n)
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


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    if args.docs:
        settings = settings.model_copy(update={"docs_dir": args.docs})
    if settings.docs_dir is not None:  # indexed first, with progress; the run then finds the index up to date
        require_run_access(settings, args.mode)  # a missing key is said before a long index build, not after
        open_index(settings.docs_dir, settings, args.quiet).close()
    return run_question(args.question, mode=args.mode, json_path=args.json, quiet=args.quiet, settings=settings)


def run_question(question: str, *, mode: str, json_path: str | None, quiet: bool, settings: Settings) -> int:
    """`python -m pipeline run`: progress on stderr, the report on stdout, the RunResult JSON to `json_path`.

    The run is recorded in the run store (RESEARCH_DB); its id and the command that resumes it are printed first.
    """
    if not question.strip():
        raise ConfigError("the question is empty; pass the question to research in quotes")
    require_run_access(settings, mode)
    check_json_path(json_path)
    run_id = new_run_id()
    with open_store(settings) as store:
        print(f"research: run {run_id} started ({mode} mode); resume with: python -m pipeline resume {run_id}",
              file=sys.stderr, flush=True)
        try:
            options = RunOptions(mode=mode)  # type: ignore[arg-type]
            result = research(question, settings, options=options, run_id=run_id, events=StderrProgress(quiet=quiet),
                              store=store)
        except KeyboardInterrupt:
            print(f"research: run {run_id} interrupted; resume with: python -m pipeline resume {run_id}",
                  file=sys.stderr, flush=True)
            raise
        except RunNotRecorded as e:
            return not_recorded(e, json_path)
    return print_outcome(result, json_path)


def not_recorded(e: RunNotRecorded, json_path: str | None, verb: str = "") -> int:
    """A run the run store failed to record: what it had (report, problems, JSON), then how to go on; exit 1."""
    print_outcome(e.result, json_path, verb)
    print(f"research: the run store failed; when it is writable again: python -m pipeline resume {e.result.run_id}",
          file=sys.stderr)
    return EXIT_FAILED


def require_run_access(settings: Settings, mode: str) -> None:
    """research.preflight's check, its model-key message also pointing to the mode that needs no key."""
    try:
        preflight.require_run_access(settings, mode)
    except preflight.NoModelAccess as e:
        raise ConfigError(f"{e} Or run with --mode extractive, which uses no model.") from None


def check_json_path(json_path: str | None) -> None:
    """ConfigError naming the fix when `json_path` cannot be written: checked before a run is paid for."""
    if not json_path:
        return
    path = Path(json_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        with path.open("a", encoding="utf-8"):
            pass
        if not existed:
            path.unlink()
    except OSError as e:
        raise ConfigError(f"cannot write the JSON to {json_path} ({e.strerror or e}); pass --json a writable "
                          "file path") from None


_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~$])")
_EMPHASIS_LINE = re.compile(r"^_(.+)_$")


def terminal_text(markdown: str) -> str:
    """The report as a person reads it on a terminal: Markdown escapes removed ("\\(VIPER\\)" -> "(VIPER)"), a line in
    emphasis shown plain; headings, lists and citations stay as written. Only for display: --json and exports keep
    the Markdown."""
    lines = [_EMPHASIS_LINE.sub(r"\1", line) for line in markdown.splitlines()]
    return _ESCAPE.sub(r"\1", "\n".join(lines)) + ("\n" if markdown.endswith("\n") else "")


def print_outcome(result: RunResult, json_path: str | None, verb: str = "") -> int:
    """The report on stdout, problems and a one-line summary on stderr, the JSON to `json_path`; the exit code.

    The report is printed first, so a JSON file that cannot be written loses nothing (exit 1, one line on it).
    """
    print(terminal_text(result.report.markdown) if sys.stdout.isatty() else result.report.markdown, flush=True)
    for p in result.problems:
        print(f"research: problem ({p.kind}): {p.message}", file=sys.stderr)
    written = False
    if json_path:
        try:
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(json_path).write_text(result.model_dump_json(indent=2), encoding="utf-8")
            written = True
        except OSError as e:
            print(f"research: cannot write the JSON to {json_path} ({e.strerror or e}); the run is in the run "
                  f"store: python -m pipeline export {result.run_id} PATH", file=sys.stderr)
    print(f"research: run {result.run_id}{verb} {result.status}; ${result.usage.cost_usd:.4f}, "
          f"{result.usage.model_calls} model calls, {result.usage.searches} searches, "
          f"{result.usage.fetches} fetches"
          + (f", {result.usage.documents} documents" if result.usage.documents else "")
          + (f"; JSON in {json_path}" if written else ""), file=sys.stderr)
    return 1 if result.status == "failed" or (json_path and not written) else 0
