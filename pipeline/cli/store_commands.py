"""CLI commands over the run store (RESEARCH_DB): runs, replay, resume, export."""
from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from pathlib import Path

from pipeline.cli.commands import EXIT_FAILED, EXIT_OK, check_json_path, not_recorded, print_outcome
from pipeline.cli.progress import StderrProgress
from pipeline.config import Settings
from pipeline.core.schema import RunResult
from pipeline.replay.tape import Tape, TapeMode
from pipeline.research import resume as resumption
from pipeline.research.orchestrator import RunNotRecorded, new_run_id, research
from pipeline.store import open_store, store_exists


def cmd_runs(args: argparse.Namespace, settings: Settings) -> int:
    if not store_exists(settings):
        print("[]" if args.json else f"No runs recorded in {settings.db_path}.")
        return EXIT_OK
    with open_store(settings, must_exist=True) as store:
        rows = store.runs(limit=args.limit)
    if args.json:
        print(json.dumps([r.model_dump() for r in rows], indent=2, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print(f"No runs recorded in {settings.db_path}.")
        return EXIT_OK
    print(f"{'ID':<12}  {'DATE':<25}  {'STATUS':<11}  {'MODE':<5}  {'COST':>8}  QUESTION")
    for r in rows:
        question = _printable(r.question)
        question = question if len(question) <= 70 else question[:69] + "…"
        print(f"{r.id:<12}  {r.date:<25}  {r.status:<11}  {r.mode:<5}  ${r.cost:>7.4f}  {question}")
    return EXIT_OK


def _printable(text: str) -> str:
    """`text` without control and format characters: a question must not send escape sequences to the terminal."""
    return "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf"))


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    check_json_path(args.json)
    with open_store(settings, must_exist=True) as store:
        row = store.require_run(args.run_id)
        mode = TapeMode.LIVE_MODEL if args.live_model else TapeMode.REPLAY
        if args.live_model:
            settings.require_model_access()  # the model is live: the environment's key and model ids
        else:
            settings = resumption.recorded_models(settings, row)
        tape = Tape.from_store(store, row.id, mode)
        run_id = new_run_id()
        how = "searches and fetches from the store, live model" if args.live_model else "offline, from the store"
        print(f"research: replaying run {row.id} as run {run_id} ({how})", file=sys.stderr, flush=True)
        result = research(row.question, settings, options=row.run_options, run_id=run_id, store=store, tape=tape,
                          events=StderrProgress(quiet=args.quiet))
        original = store.result(row.id)
    summary = tape.summary()
    if summary["missed"] or summary["diverged"]:
        print(f"research: {summary['missed']} calls were not in the recording; requests that differ from the "
              f"recording (code or prompts changed): {', '.join(summary['diverged']) or 'none'}", file=sys.stderr)
    if original is not None:
        differing = compare_results(original, result)
        print("research: the replay matches the recorded result" if not differing else
              f"research: the replay differs from the recorded result in: {', '.join(differing)}", file=sys.stderr)
    return print_outcome(result, args.json, verb=f" (replay of {row.id})")


def compare_results(a: RunResult, b: RunResult) -> list[str]:
    """Top-level RunResult fields that differ, ignoring run_id and timings."""
    skip = {"run_id", "timings"}
    da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
    return [k for k in da if k not in skip and da[k] != db.get(k)]


def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    check_json_path(args.json)
    with open_store(settings, must_exist=True) as store:
        try:
            ready = resumption.prepare(store, args.run_id, settings)
        except resumption.NotResumable as e:
            print(f"research: {e}", file=sys.stderr)
            return EXIT_FAILED
        checkpoint = store.checkpoint(ready.row.id)
        where = f"after {checkpoint.after}" if checkpoint else "from the start (no step had finished)"
        print(f"research: resuming run {ready.row.id} {where}; recorded calls are reused, not repeated",
              file=sys.stderr, flush=True)
        try:
            result = resumption.resume(store, ready, events=StderrProgress(quiet=args.quiet))
        except RunNotRecorded as e:
            return not_recorded(e, args.json, verb=" (resumed)")
    summary = ready.tape.summary()
    print(f"research: {summary['served']} recorded calls reused, {summary['missed']} made now", file=sys.stderr)
    return print_outcome(result, args.json, verb=" (resumed)")


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    with open_store(settings, must_exist=True) as store:
        row = store.require_run(args.run_id)
        result = store.result(row.id)
    if result is None:
        print(f"research: run {row.id} has no result yet ({row.shown_status}); resume it with: "
              f"python -m pipeline resume {row.id}", file=sys.stderr)
        return EXIT_FAILED
    path = Path(args.path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    except OSError as e:
        print(f"research: cannot write {path} ({e.strerror or e}); choose a writable file path", file=sys.stderr)
        return EXIT_FAILED
    print(f"research: run {row.id} written to {path}", file=sys.stderr)
    return EXIT_OK
