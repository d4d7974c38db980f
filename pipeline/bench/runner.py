"""The `bench` command's runner: each (question, mode, repeat) of a suite on its own budget, saved, then graded.

Runs are saved in OUT/<suite>/ as `<run_id>.json` with their timeline (docs/BENCHMARK.md); a run already saved there
for the same suite version, question, mode and repeat is not made again, whatever its status, so an interrupted or
sharded bench resumes and merges by construction. The summary is made from every saved run of the suite version.
"""
from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pipeline import __version__
from pipeline.bench.baseline import baseline_grades
from pipeline.bench.grade import RunGrade, grade_run
from pipeline.bench.pages import PageTexts
from pipeline.bench.saved import SUMMARY, BenchSummary, read_summary
from pipeline.bench.suite import LIVE, MANIFEST, Suite, SuiteError, load_suite
from pipeline.bench.summary import grade_suite
from pipeline.config import SHIPPED_CORPORA, ConfigError, Settings
from pipeline.core.schema import BenchInfo, BudgetLimits, Mode, Problem, RunOptions, RunResult, RunStatus
from pipeline.research.orchestrator import new_run_id, research, run_models
from pipeline.research.prompts import version as prompt_version
from pipeline.store import open_store, store_exists
from pipeline.store.base import RunStore
from pipeline.store.files import TIMELINE_SUFFIX, read_run_file, save_run_file
from pipeline.store.sql import settings_secrets
from pipeline.store.timeline import TimelineEntry, TimelineRecorder
from pipeline.web.docs_pages import documents_only

ROOT = SHIPPED_CORPORA.parents[1]
SUITES = ROOT / "benchmarks" / "suites"
DEFAULT_OUT = ROOT / "benchmark_runs"
MODES: tuple[Mode, ...] = ("extractive", "fixed", "tools")
# A model run starts only while the ceiling leaves this share of a run's budget: a run capped far below the budget
# the others had would be saved (and never re-run) as a poor result of the budget, not of the mode.
MIN_RUN_SHARE = 0.1
CRASH = "bench_crash"
_ORDER = {m: i for i, m in enumerate(MODES)}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunKey(_Model):
    """What makes a benchmark run: its question, mode and repeat (from 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    question_id: str
    mode: Mode
    repeat: int = Field(ge=1)

    def label(self) -> str:
        return f"{self.question_id} {self.mode} r{self.repeat}"


class Shard(_Model):
    """The `index`-th (from 1) of `count` slices of a suite's ordered runs: every count-th run from index - 1."""

    index: int = Field(ge=1)
    count: int = Field(ge=1)

    @model_validator(mode="after")
    def _in_range(self) -> Shard:
        if self.index > self.count:
            raise ValueError(f"shard {self.index} of {self.count} does not exist")
        return self

    def take(self, keys: Sequence[RunKey]) -> list[RunKey]:
        return list(keys[self.index - 1::self.count])

    def label(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """`I/N` as a Shard; ConfigError naming the fix when it is not one."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if m is None or not 1 <= int(m[1]) <= int(m[2]):
        raise ConfigError(f"--shard {text!r} is not I/N with 1 <= I <= N (e.g. --shard 1/4)")
    return Shard(index=int(m[1]), count=int(m[2]))


def shard_from_env(env: Mapping[str, str]) -> Shard | None:
    """The shard of a Cloud Run Job task (CLOUD_RUN_TASK_INDEX from 0, CLOUD_RUN_TASK_COUNT), or None when unset."""
    index, count = env.get("CLOUD_RUN_TASK_INDEX", "").strip(), env.get("CLOUD_RUN_TASK_COUNT", "").strip()
    if not index and not count:
        return None
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise ConfigError(f"CLOUD_RUN_TASK_INDEX={index!r} and CLOUD_RUN_TASK_COUNT={count!r} must be set together, "
                          "with 0 <= index < count")
    return Shard(index=int(index) + 1, count=int(count))


class BenchConfig(_Model):
    """What one `bench` invocation runs and where it saves."""

    modes: list[Mode] = Field(default_factory=lambda: list(MODES), min_length=1)
    repeat: int = Field(1, ge=1)
    out: Path = DEFAULT_OUT
    max_usd: float | None = Field(None, gt=0)
    shard: Shard | None = None
    corpora: Path = SHIPPED_CORPORA
    limits: BudgetLimits = Field(default_factory=BudgetLimits)


class RunLine(_Model):
    """One run made, for the progress line."""

    position: int
    total: int
    key: RunKey
    run_id: str
    status: RunStatus
    findings: int
    cost_usd: float
    seconds: float
    crashed: str | None = None


class BenchOutcome(_Model):
    """What one invocation did, and the summary it wrote."""

    folder: Path
    planned: int = Field(description="Runs of this shard (or of the suite, unsharded).")
    saved_before: int = 0
    made: int = 0
    crashed: int = 0
    stopped: str | None = None
    interrupted: bool = False
    summary: BenchSummary


def find_suite(spec: str, suites: Path = SUITES) -> Suite:
    """The suite in the file `spec`, or the one named `spec` under `suites` (news: suites/news.json); SuiteError."""
    path = Path(spec)
    named = suites / f"{spec}.json"
    if not path.is_file() and re.fullmatch(r"[A-Za-z0-9_.-]+", spec) and not spec.endswith(".json"):
        if not named.is_file():
            shipped = ", ".join(sorted(p.stem for p in suites.glob("*.json"))) or "none"
            raise SuiteError(f"{spec}: no such suite file, nor a suite of that name in {suites} (shipped: {shipped})")
        path = named
    return load_suite(path)


def plan_runs(suite: Suite, modes: Sequence[Mode], repeat: int) -> list[RunKey]:
    """Every (question, mode, repeat) in the stable order runs are made and shards are cut: question, mode, repeat."""
    return [RunKey(question_id=q.id, mode=m, repeat=r) for q in suite.questions for m in modes
            for r in range(1, repeat + 1)]


def question_settings(base: Settings, corpus: str, corpora: Path) -> Settings:
    """Settings for a run over `corpus`: the corpus provider on a frozen web, the folder alone for a documents
    corpus (as `run --docs` researches it); a live suite keeps the environment's."""
    if corpus == LIVE:
        return base
    folder = Path(corpora) / corpus
    if folder.is_dir() and not (folder / MANIFEST).is_file():
        return documents_only(base, folder)
    return base.model_copy(update={"search_provider": "corpus", "corpus_dir": str(folder)})


def run_settings(suite: Suite, keys: Sequence[RunKey], base: Settings, corpora: Path) -> dict[str, Settings]:
    """Settings per corpus the runs `keys` use; ConfigError naming the question when its corpus folder is missing or
    leaves `corpora`, or when a live corpus has no web search provider."""
    questions = {q.id: q for q in suite.questions}
    found: dict[str, Settings] = {}
    for key in keys:
        q = questions[key.question_id]
        corpus = suite.corpus_of(q)
        if corpus in found:
            continue
        try:
            folder = suite.corpus_dir(Path(corpora), q)
        except SuiteError as e:
            raise ConfigError(f"suite {suite.name}, question {q.id!r}: {e}") from None
        if folder is None and base.search_provider == "corpus":
            raise ConfigError(f"suite {suite.name}, question {q.id!r} runs on the live web: set "
                              "RESEARCH_SEARCH_PROVIDER to a web search provider (brave, tavily, searxng or anthropic)")
        if folder is not None and not folder.is_dir():
            raise ConfigError(f"suite {suite.name}, question {q.id!r}: corpus {corpus!r} is not a folder in "
                              f"{corpora} (saved pages with a manifest.jsonl, or documents)")
        found[corpus] = question_settings(base, corpus, corpora)
    return found


def saved_runs(folder: Path, suite: Suite) -> dict[RunKey, RunResult]:
    """The runs of this suite version saved in `folder`, by key (of duplicates, the earliest)."""
    found: dict[RunKey, RunResult] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        if path.name == SUMMARY or path.name.endswith(TIMELINE_SUFFIX) or path.name.startswith("."):
            continue
        try:
            rr = read_run_file(path)
        except (OSError, ValueError, ValidationError):
            continue
        b = rr.bench
        if b is None or b.suite != suite.name or b.suite_version != suite.version:
            continue
        key = RunKey(question_id=b.question_id, mode=rr.mode, repeat=b.repeat)
        held = found.get(key)
        if held is None or (b.date, rr.run_id) < (held.bench.date if held.bench else "", held.run_id):
            found[key] = rr
    return found


def spent_usd(folder: Path, suite: Suite) -> float:
    """Dollars spent by the runs of this suite version saved in `folder` (every shard's)."""
    return round(sum(r.usage.cost_usd for r in saved_runs(folder, suite).values()), 6)


@cache
def git_commit() -> str | None:
    """The checkout's commit (`git rev-parse HEAD`), else VERBATIM_GIT_COMMIT (the container image has no .git; its
    build sets this), else None."""
    sha = ""
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10,
                              check=False)
        sha = proc.stdout.strip() if proc.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        pass
    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        sha = os.environ.get("VERBATIM_GIT_COMMIT", "").strip().lower()
    return sha if re.fullmatch(r"[0-9a-f]{40}", sha) else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def bench_info(suite: Suite, key: RunKey, corpus: str, settings: Settings) -> BenchInfo:
    """What produced the run: suite, question, repeat, corpus, code and git commit, prompt hash, models, date."""
    return BenchInfo(suite=suite.name, suite_version=suite.version, question_id=key.question_id, repeat=key.repeat,
                     corpus=corpus, code_version=__version__, git_commit=git_commit(), prompt_hash=prompt_version(),
                     models=run_models(settings, key.mode), date=_now())


def run_one(suite: Suite, key: RunKey, settings: Settings, limits: BudgetLimits,
            store: RunStore | None) -> tuple[RunResult, list[TimelineEntry], str | None]:
    """One run recorded in `store`, with its BenchInfo and timeline, and why it crashed (None when it did not).

    An exception out of research() (a bug, or a corpus gone since the check) becomes a failed RunResult saying so;
    a KeyboardInterrupt is not caught: nothing is saved for the run, so the next bench makes it again.
    """
    question = next(q for q in suite.questions if q.id == key.question_id)
    corpus = suite.corpus_of(question)
    run_id = new_run_id()
    timeline = TimelineRecorder()
    started = time.time()
    crashed: str | None = None
    try:
        result = research(question.question, settings, options=RunOptions(mode=key.mode, limits=limits),
                          events=timeline, run_id=run_id, store=store)
    except Exception as e:  # research() turns faults into problems; this is a bug or a broken setting: say so
        crashed = f"{type(e).__name__}: {e}"
        result = RunResult(
            run_id=run_id, question=" ".join(question.question.split()), mode=key.mode,
            models=run_models(settings, key.mode), status="failed",
            problems=[Problem(kind=CRASH, step="bench", message=f"the run crashed ({crashed}); the bench went on "
                                                                "with the other runs")],
            timings={"started_at": round(started, 3), "total": round(time.time() - started, 3)})
    result = result.model_copy(update={"bench": bench_info(suite, key, corpus, settings)})
    if store is not None and store.run(run_id) is not None:
        # research() stored the result before it had its BenchInfo (or, on a crash, left the row running)
        store.recorder(run_id, secrets=settings_secrets(settings)).finish(result)
    return result, timeline.entries(), crashed


def run_bench(suite: Suite, settings: Settings, config: BenchConfig,
              on_run: Callable[[RunLine], None] | None = None) -> BenchOutcome:
    """Make every run of `config` not already saved, save each as it ends, then (re)write the suite's summary.

    With `max_usd`, a model run starts only while the ceiling (less what every saved run of the suite version
    spent) leaves MIN_RUN_SHARE of a run's budget, and its budget is capped at what is left; runs that cannot be
    afforded are not made and the summary says the ceiling stopped the bench. Ctrl-C between or during runs stops
    the bench (the summary says so); runs saved so far are kept and the next bench resumes.
    """
    folder = Path(config.out) / suite.name
    keys = plan_runs(suite, config.modes, config.repeat)
    mine = config.shard.take(keys) if config.shard else keys
    saved = saved_runs(folder, suite)
    todo = [k for k in mine if k not in saved]
    by_corpus = run_settings(suite, todo, settings, config.corpora)
    questions = {q.id: q for q in suite.questions}
    outcome = BenchOutcome(folder=folder, planned=len(mine), saved_before=len(mine) - len(todo),
                           summary=_empty_summary(suite))
    unaffordable = 0
    reasons: list[str] = []
    with open_store(settings) as store:
        try:
            for position, key in enumerate(todo, 1):
                limits = config.limits
                if config.max_usd is not None and key.mode != "extractive":
                    left = config.max_usd - spent_usd(folder, suite)
                    if left < limits.cost_usd * MIN_RUN_SHARE:
                        unaffordable += 1
                        continue
                    limits = limits.model_copy(update={"cost_usd": min(limits.cost_usd, round(left, 6))})
                run_in = by_corpus[suite.corpus_of(questions[key.question_id])]
                result, timeline, crashed = run_one(suite, key, run_in, limits, store)
                save_run_file(folder, result, timeline)
                outcome.made += 1
                outcome.crashed += crashed is not None
                if on_run is not None:
                    on_run(RunLine(position=position, total=len(todo), key=key, run_id=result.run_id,
                                   status=result.status, findings=len(result.findings),
                                   cost_usd=result.usage.cost_usd, seconds=result.timings.get("total", 0.0),
                                   crashed=crashed))
        except KeyboardInterrupt:
            outcome.interrupted = True
            reasons.append(f"interrupted after {outcome.made} of {len(todo)} runs; the same command resumes "
                           "without repeating the runs saved")
        if unaffordable:
            reasons.append(f"the ${config.max_usd:.2f} ceiling was reached: ${spent_usd(folder, suite):.4f} spent "
                           f"by the suite's saved runs, and a model run needs at least "
                           f"${config.limits.cost_usd * MIN_RUN_SHARE:.2f} of it; {unaffordable} model run(s) not made")
        outcome.stopped = "; ".join(reasons) or None
        outcome.summary = write_summary(suite, folder, settings, config.corpora, repeats=config.repeat,
                                        modes=config.modes, stopped=outcome.stopped, store=store)
    return outcome


def _empty_summary(suite: Suite) -> BenchSummary:
    return BenchSummary(suite=suite.name, version=suite.version, corpus=suite.corpus, graded_at=_now(),
                        code_version=__version__, summary=grade_suite([], 1))


def grade_saved(suite: Suite, saved: Mapping[RunKey, RunResult], pages: PageTexts) -> list[RunGrade]:
    """One grade per saved run of a question still in the suite, in plan order."""
    questions = {q.id: (i, q) for i, q in enumerate(suite.questions)}
    grades = []
    for key in sorted((k for k in saved if k.question_id in questions),
                      key=lambda k: (questions[k.question_id][0], _ORDER[k.mode], k.repeat)):
        q = questions[key.question_id][1]
        rr = saved[key]
        corpus = suite.corpus_of(q)
        grades.append(grade_run(q, rr, pages.for_run(rr, corpus), repeat=key.repeat,
                                max_sub_questions=suite.max_sub_questions, layout_of=pages.layouts(corpus)))
    return grades


def write_summary(suite: Suite, folder: Path, settings: Settings, corpora: Path, *, repeats: int = 1,
                  modes: Sequence[Mode] | None = None, stopped: str | None = None,
                  store: RunStore | None = None) -> BenchSummary:
    """Grade every run of the suite version saved in `folder` and write `folder/summary.json` (the shard merge).

    pass^k counts `repeats` or the most repeats saved, whichever is more. A reason the bench stopped is kept from
    the previous summary while runs it planned (`modes`, else the modes saved, times the repeats) are missing.
    """
    saved = saved_runs(folder, suite)
    if store is None and store_exists(settings):
        with open_store(settings, must_exist=True) as own:
            return write_summary(suite, folder, settings, corpora, repeats=repeats, modes=modes, stopped=stopped,
                                 store=own)
    pages = PageTexts(settings, corpora, store)
    try:
        grades = grade_saved(suite, saved, pages)
    finally:
        pages.close()
    graded = {g.question_id for g in grades}
    baseline = baseline_grades(suite, [q for q in suite.questions if q.id in graded], corpora, settings)
    k = max([repeats, *(g.repeat for g in grades)])
    planned = plan_runs(suite, list(modes) if modes else sorted({key.mode for key in saved}, key=_ORDER.__getitem__), k)
    previous = read_summary(folder)
    if stopped is None and previous is not None and previous.version == suite.version and previous.stopped \
            and any(key not in saved for key in planned):
        stopped = previous.stopped
    summary = BenchSummary(
        suite=suite.name, version=suite.version, corpus=suite.corpus, description=suite.description,
        graded_at=_now(), code_version=__version__, git_commit=git_commit(), stopped=stopped,
        questions={q.id: q.question for q in suite.questions}, grades=grades, baseline=baseline,
        summary=grade_suite([*grades, *baseline], k))
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{SUMMARY}.{os.getpid()}.tmp"
    tmp.write_text(summary.model_dump_json(indent=1), encoding="utf-8")
    os.replace(tmp, folder / SUMMARY)
    return summary

