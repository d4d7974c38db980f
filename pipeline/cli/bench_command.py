"""`python -m pipeline bench SUITE`: run a suite in each mode, save and grade the runs (docs/BENCHMARK.md).

Exit 0 when the bench ran (whatever the grades), 1 when a run crashed or the dollar ceiling stopped it, 2 on a
usage or configuration error (a suite file with a schema error, a missing corpus, no model key), 130 on Ctrl-C.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pipeline.bench import runner
from pipeline.bench.grade import BASELINE, BASELINE_LABEL
from pipeline.bench.runner import MODES, BenchConfig, RunLine
from pipeline.bench.saved import SUMMARY, BenchSummary
from pipeline.bench.suite import SuiteError
from pipeline.bench.summary import ModeSummary
from pipeline.cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, require_run_access
from pipeline.config import SHIPPED_CORPORA, ConfigError, Settings
from pipeline.core.schema import Mode

EXIT_INTERRUPTED = 130


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `bench` on the CLI's subparsers."""
    bench = sub.add_parser("bench", help="run a benchmark suite, save every run and grade them (summary.json)")
    bench.add_argument("suite", help="a suite name under benchmarks/suites (news, pydocs, ...) or a suite file")
    bench.add_argument("--modes", default=None, metavar="M,M",
                       help=f"comma-separated modes to run (default {','.join(MODES)}; fixed and tools need a key)")
    bench.add_argument("--repeat", type=int, default=1, metavar="K", help="runs per question and mode (default 1)")
    bench.add_argument("--out", type=Path, default=runner.DEFAULT_OUT, metavar="DIR",
                       help="runs are saved in DIR/<suite>/ (default benchmark_runs/)")
    bench.add_argument("--max-usd", type=float, default=None, metavar="X",
                       help="dollar ceiling for the whole suite, counting every run saved for it")
    bench.add_argument("--shard", default=None, metavar="I/N",
                       help="run the I-th of N slices (default: CLOUD_RUN_TASK_INDEX/COUNT when set)")
    bench.add_argument("--corpora", type=Path, default=SHIPPED_CORPORA, metavar="DIR",
                       help="the folder holding the corpora suites name (default benchmarks/corpora)")
    bench.add_argument("--summary-only", action="store_true",
                       help="make no run: re-grade the saved runs and rewrite summary.json (merges shards)")
    bench.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def parse_modes(text: str | None) -> list[Mode]:
    """`--modes` as a list without repeats; ConfigError naming the valid modes."""
    if text is None:
        return list(MODES)
    modes: list[Mode] = []
    for part in (p.strip() for p in text.split(",")):
        match part:
            case "extractive" | "fixed" | "tools":
                if part not in modes:
                    modes.append(part)
            case _:
                raise ConfigError(f"--modes: {part!r} is not a mode; use a comma-separated list of "
                                  f"{', '.join(MODES)}")
    if not modes:
        raise ConfigError(f"--modes is empty; use a comma-separated list of {', '.join(MODES)}")
    return modes


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    try:
        suite = runner.find_suite(args.suite)
    except SuiteError as e:
        print(f"research bench: {e}", file=sys.stderr)
        return EXIT_USAGE
    modes = parse_modes(args.modes)
    if args.repeat < 1:
        raise ConfigError("--repeat must be at least 1")
    if args.max_usd is not None and not args.max_usd > 0:
        raise ConfigError("--max-usd must be a positive number of dollars")
    shard = runner.parse_shard(args.shard) if args.shard else runner.shard_from_env(os.environ)
    config = BenchConfig(modes=modes, repeat=args.repeat, out=args.out, max_usd=args.max_usd, shard=shard,
                         corpora=args.corpora)
    folder = Path(args.out) / suite.name
    if args.summary_only:
        if not runner.saved_runs(folder, suite):
            raise ConfigError(f"no saved runs of suite {suite.name} version {suite.version} in {folder}")
        summary = runner.write_summary(suite, folder, settings, config.corpora, repeats=args.repeat,
                                modes=modes if args.modes else None)
        print_figures(summary, folder)
        return EXIT_OK

    keys = runner.plan_runs(suite, modes, args.repeat)
    mine = shard.take(keys) if shard else keys
    _check_access(settings, modes, runner.run_settings(suite, mine, settings, config.corpora))
    quiet = args.quiet
    if not quiet:
        saved = runner.saved_runs(folder, suite)
        print(f"research bench: suite {suite.name} v{suite.version}, {len(mine)} runs"
              + (f" (shard {shard.label()} of {len(keys)})" if shard else "")
              + f", {sum(k in saved for k in mine)} saved already (not made again); saving in {folder}",
              file=sys.stderr, flush=True)
    outcome = runner.run_bench(suite, settings, config, on_run=None if quiet else _print_run)
    print_figures(outcome.summary, folder)
    if outcome.crashed:
        print(f"research bench: {outcome.crashed} run(s) crashed; each is saved as failed with its problem",
              file=sys.stderr)
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if outcome.crashed or outcome.stopped else EXIT_OK


def _check_access(settings: Settings, modes: list[Mode], by_corpus: dict[str, Settings]) -> None:
    """ConfigError before any run when a mode needs a key that is missing, or a corpus or provider is unusable."""
    model_mode = next((m for m in modes if m != "extractive"), None)
    if model_mode is not None:
        try:
            settings.require_model_access()
        except ConfigError as e:
            raise ConfigError(f"{e} Or pass --modes extractive, which uses no model.") from None
    for corpus_settings in by_corpus.values():
        require_run_access(corpus_settings, model_mode or "extractive")


def _print_run(line: RunLine) -> None:
    crashed = f" (crashed: {line.crashed})" if line.crashed else ""
    print(f"[{line.position}/{line.total}] {line.key.label()}: {line.status}{crashed}, {line.findings} findings, "
          f"${line.cost_usd:.4f}, {line.seconds:.1f} s", file=sys.stderr, flush=True)


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def mode_line(m: ModeSummary, baseline: ModeSummary | None = None) -> str:
    """One mode's figures on one line; with the baseline's, the margins over it."""
    margin = ""
    if baseline is not None and m.mode != BASELINE:
        margin = (f" [over the baseline: pass {_margin(m.pass_rate, baseline.pass_rate)}, answer recall "
                  f"{_margin(m.answer_recall, baseline.answer_recall)}]")
    name = BASELINE_LABEL if m.mode == BASELINE else m.mode
    return (f"{name}: {m.runs} runs of {m.questions} questions, pass {_share(m.pass_rate)} (pass^{m.repeats} "
            f"{_share(m.pass_k)}), citation precision {_share(m.citation_precision)}, gold-page recall "
            f"{_share(m.gold_page_recall)}, answer recall {_share(m.answer_recall)}, ${m.cost_usd:.4f}, "
            f"{m.input_tokens + m.output_tokens:,} tokens, {m.model_calls} model calls, "
            f"{m.wall_seconds_mean or 0:.1f} s per run{margin}")


def _margin(value: float | None, reference: float | None) -> str:
    return "n/a" if value is None or reference is None else f"{value - reference:+.2f}"


def print_figures(summary: BenchSummary, folder: Path) -> None:
    """The per-mode figures on stdout, and where the summary is."""
    print(f"suite {summary.suite} v{summary.version}: {len(summary.grades)} saved runs graded; {folder / SUMMARY}")
    parts = [("all questions", summary.summary.modes)] + [
        (f"{split} split", modes) for split, modes in summary.summary.splits.items()]
    for title, modes in parts:
        print(f"  {title}:")
        for m in modes.values():
            print("    " + mode_line(m, modes.get(BASELINE)))
    if summary.stopped:
        print(f"  stopped: {summary.stopped}")
