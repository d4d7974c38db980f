"""Saved runs for the app: RunResult JSON files summarised into table rows (cached per file, refreshed when a file
changes) and loaded by run id, and each suite folder's graded summary (summary.json). Bad files are reported, never
fatal."""
from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from pipeline.bench.grade import BASELINE, BASELINE_LABEL, RunGrade
from pipeline.bench.saved import SUMMARY, BenchSummary, read_summary
from pipeline.core.schema import BudgetLimits, RunResult
from pipeline.store.files import RUN_ID, TIMELINE_SUFFIX, read_run_file
from pipeline.store.timeline import step_times
from ui.costs import count

_BAD_ID = "its run id {!r} is not a plain id (letters, digits, '_', '.', '-'), so no link could open it"
_BAD_SUMMARY = "it is not a valid benchmark summary, so this suite has no scoreboard"
DEFAULT_SUITE = "default"
NO_MODEL = "no model"


def report_path(run_id: str) -> str:
    """The shareable path of a run's report."""
    return f"/report?run={quote(run_id, safe='')}"


def is_extractive(mode: str, models: Mapping[str, str]) -> bool:
    """True for a run that used no model: extractive mode, or (older files) "none" recorded as every model."""
    picked = [v for k, v in models.items() if k in ("lead", "worker")]
    return mode == "extractive" or (bool(picked) and all(v == "none" for v in picked))


def models_label(mode: str, models: Mapping[str, str]) -> str:
    """The models of a run as the pages show them: "lead / worker", or "no model" for an extractive run."""
    if is_extractive(mode, models):
        return NO_MODEL
    return " / ".join(v for k, v in models.items() if k in ("lead", "worker"))


def mode_label(mode: str) -> str:
    """A mode as lists and comparisons name it; the extractive mode says it used no model; the baseline says what it
    is (pipeline/bench/baseline.py)."""
    if mode == BASELINE:
        return BASELINE_LABEL
    return f"{mode} ({NO_MODEL})" if mode == "extractive" else mode


def run_header(rr: RunResult) -> str:
    """The mode and models part of a report's header: "Extractive · no model", or "fixed mode · lead / worker"."""
    if is_extractive(rr.mode, rr.models):
        return f"Extractive · {NO_MODEL}"
    return f"{rr.mode} mode · {models_label(rr.mode, rr.models) or 'models unknown'}"


class RunSummary(BaseModel):
    """One row of the benchmark table."""

    run_id: str
    question: str
    suite: str = "default"
    mode: str
    models: str = ""
    lead_model: str = ""
    worker_model: str = ""
    date: str = ""
    status: str
    findings: int
    rejected: int
    answered: int = 0
    planned: int = 0
    problems: int
    cost_usd: float
    seconds: float = 0.0
    budget: str = ""
    file: str


def budget_label(limits: BudgetLimits) -> str:
    """A run's budget as the comparison names it: its searches, fetches, model calls, tokens and dollars."""
    return (f"{limits.searches} searches, {limits.fetches} fetches, {limits.model_calls} model calls, "
            f"{limits.input_tokens:,} input / {limits.output_tokens:,} output tokens, ${limits.cost_usd:.2f}")


def summarise(rr: RunResult, *, file: str, suite: str, mtime: float | None = None) -> RunSummary:
    """The table row of one run; coverage counts planned sub-questions with at least one passed-on finding."""
    plan = rr.plan
    answered_ids = {f.sub_question for f in rr.findings if f.support != "unsupported"}
    answered = sum(1 for sq in plan.sub_questions if sq.id in answered_ids) if plan else 0
    planned = (len(plan.sub_questions) + len(plan.not_researched)) if plan else 0
    return RunSummary(
        run_id=rr.run_id, question=rr.question, suite=suite, mode=rr.mode,
        models=models_label(rr.mode, rr.models), lead_model=rr.models.get("lead", ""),
        worker_model=rr.models.get("worker", ""), date=_run_date(rr, mtime), status=rr.status,
        findings=len(rr.findings), rejected=len(rr.rejected), answered=answered, planned=planned,
        problems=len(rr.problems), cost_usd=round(rr.usage.cost_usd, 6),
        seconds=round(rr.timings.get("total") or sum(step_times(rr).values()), 3),
        budget=budget_label(rr.budget.limits), file=file,
    )


def _run_date(rr: RunResult, mtime: float | None) -> str:
    """When the run happened: its bench date, else its start, else its last fetch (older files), else the file's."""
    if rr.bench and rr.bench.date:
        try:
            when = datetime.fromisoformat(rr.bench.date)
            return (when.astimezone(UTC) if when.tzinfo else when).strftime("%Y-%m-%d %H:%M:%S")
        except ValueError:
            return rr.bench.date[:19].replace("T", " ")
    if started := rr.timings.get("started_at"):
        return datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M:%S")
    fetched = [s.fetched_at for s in rr.sources if s.fetched_at]
    if fetched:
        return max(fetched)[:19].replace("T", " ")
    if mtime is not None:
        return datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return ""


def _reason(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


def suite_of(rel: Path) -> str:
    """The suite of a file by its path under the library's folder: its first sub-folder, else "default"."""
    return rel.parts[0] if len(rel.parts) > 1 else DEFAULT_SUITE


class Snapshot(NamedTuple):
    """The library as of one look: rows (newest first), (file, reason) of bad files, each suite's valid summary, and
    the generation they are of (the content key of anything computed from them)."""

    generation: int
    rows: list[RunSummary]
    errors: list[tuple[str, str]]
    summaries: dict[str, BenchSummary]


class RunLibrary:
    """The RunResult files and suite summaries under one folder (a sub-folder names the suite), re-read when changed."""

    def __init__(self, folder: Path, clock: Callable[[], float] = time.monotonic):
        self.folder = Path(folder)
        self._clock = clock
        self._scanned: tuple[float, Snapshot] | None = None
        self._found: dict[str, tuple[int, int]] = {}  # each run file's (mtime, size) at the last look
        self._lock = threading.Lock()
        self._seen: dict[Path, tuple[tuple[int, int], RunSummary | str]] = {}
        self._by_id: dict[str, Path] = {}
        self._summaries: dict[Path, tuple[tuple[int, int], BenchSummary | None]] = {}
        self._generation = 0  # counts every file or summary found added, changed or removed

    def refresh(self, max_age: float = 0.0) -> tuple[list[RunSummary], list[tuple[str, str]]]:
        """Rows (newest first) and (file, reason) for each file that is not a RunResult; see snapshot()."""
        snap = self.snapshot(max_age)
        return snap.rows, snap.errors

    def snapshot(self, max_age: float = 0.0) -> Snapshot:
        """The library now: cheap when nothing changed, and no look at the folder at all when the last one is under
        `max_age` seconds old. Its lists are shared: read them, never change them."""
        with self._lock:
            if self._scanned is not None and self._clock() - self._scanned[0] < max_age:
                return self._scanned[1]
            files = self._files()
            generation = self._generation
            summaries = self._refresh_summaries()
            if self._scanned is not None and files == self._found and generation == self._generation:
                self._scanned = (self._clock(), self._scanned[1])  # nothing changed: the same snapshot
                return self._scanned[1]
            self._found = files
            found = {Path(p): sig for p, sig in files.items()}
            for gone in set(self._seen) - set(found):
                del self._seen[gone]
                self._generation += 1
            for path, sig in found.items():
                if path in self._seen and self._seen[path][0] == sig:
                    continue
                self._generation += 1
                count("run file parsed")
                rel = path.relative_to(self.folder)
                suite = suite_of(rel)
                try:
                    rr = read_run_file(path)
                    entry: RunSummary | str = summarise(rr, file=str(rel), suite=suite, mtime=sig[0] / 1e9) \
                        if RUN_ID.match(rr.run_id) else _BAD_ID.format(rr.run_id[:80])
                except (ValidationError, OSError, ValueError) as e:
                    entry = _reason(e)
                self._seen[path] = (sig, entry)
            rows = [seen for _, seen in self._seen.values() if isinstance(seen, RunSummary)]
            errors = [(str(p.relative_to(self.folder)), seen) for p, (_, seen) in self._seen.items()
                      if isinstance(seen, str)]
            errors += [(str(p.relative_to(self.folder)), _BAD_SUMMARY) for p in summaries
                       if self._summaries[p][1] is None]
            errors.sort()
            self._by_id = {}
            for path, (_, seen) in sorted(self._seen.items()):
                if isinstance(seen, RunSummary):
                    self._by_id.setdefault(seen.run_id, path)
            rows.sort(key=lambda r: (r.date, r.run_id), reverse=True)
            snap = Snapshot(self._generation, rows, errors, self._valid_summaries())
            self._scanned = (self._clock(), snap)
        return snap

    def _files(self) -> dict[str, tuple[int, int]]:
        """Each run file under the folder (not a timeline or a summary; symlinked folders not entered, as rglob) with
        its (mtime, size): os.walk and os.stat, a third of what pathlib costs over a few hundred files."""
        found: dict[str, tuple[int, int]] = {}
        top = str(self.folder)
        for root, _dirs, names in os.walk(top):
            for name in names:
                if not name.endswith(".json") or name.endswith(TIMELINE_SUFFIX) or (
                        name == SUMMARY and top in (root, os.path.dirname(root))):
                    continue
                path = os.path.join(root, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    found[path] = (st.st_mtime_ns, st.st_size)
        return found

    def _suite_folders(self) -> list[Path]:
        return [p for p in self.folder.iterdir() if p.is_dir()] if self.folder.is_dir() else []

    def _refresh_summaries(self) -> list[Path]:
        """Re-reads each changed summary.json (the library's folder or a suite folder); returns them all."""
        found: dict[Path, tuple[int, int]] = {}
        for folder in (self.folder, *self._suite_folders()):
            try:
                st = (folder / SUMMARY).stat()
            except OSError:
                continue
            found[folder / SUMMARY] = (st.st_mtime_ns, st.st_size)
        for gone in set(self._summaries) - set(found):
            del self._summaries[gone]
            self._generation += 1
        for path, sig in found.items():
            if path not in self._summaries or self._summaries[path][0] != sig:
                count("summary parsed")
                self._generation += 1
                self._summaries[path] = (sig, read_summary(path.parent))
        return sorted(found)

    def summaries(self) -> dict[str, BenchSummary]:
        """Each suite's valid summary by suite (its folder's name), as of the last refresh."""
        with self._lock:
            return self._valid_summaries()

    def _valid_summaries(self) -> dict[str, BenchSummary]:
        return {suite_of(p.relative_to(self.folder)): summary for p, (_, summary) in sorted(self._summaries.items())
                if summary is not None}

    def grading(self, run_id: str) -> tuple[BenchSummary, RunGrade] | None:
        """The summary of the suite whose folder holds `run_id`, and its grade of that run; None if it has none."""
        path = self.path_of(run_id)
        if path is None:
            return None
        with self._lock:  # a summary written since the last refresh counts: stat() of a few files is cheap
            self._refresh_summaries()
        summary = self.summaries().get(suite_of(path.relative_to(self.folder)))
        grade = next((g for g in summary.grades if g.run_id == run_id), None) if summary else None
        return (summary, grade) if summary and grade else None

    def path_of(self, run_id: str) -> Path | None:
        """The file holding `run_id`, as of the last refresh."""
        with self._lock:
            return self._by_id.get(run_id)

    def signature(self, run_id: str) -> tuple[Path, int, int] | None:
        """The file holding `run_id` with its mtime (ns) and size as of the last refresh: what its content is keyed
        by; None when no file holds it."""
        with self._lock:
            path = self._by_id.get(run_id)
            return (path, *self._seen[path][0]) if path is not None and path in self._seen else None

    def load(self, run_id: str) -> RunResult | None:
        """The full RunResult of `run_id`, or None when no valid file holds it."""
        path = self.path_of(run_id)
        if path is None:
            self.refresh()
            path = self.path_of(run_id)
        if path is None:
            return None
        count("run file parsed")
        try:
            return read_run_file(path)
        except (ValidationError, OSError, ValueError):
            return None


def load_saved_runs(folder: Path) -> tuple[list[RunSummary], list[tuple[str, str]]]:
    """Summaries of every valid RunResult file in `folder` (and its sub-folders), and (file, reason) for the rest."""
    return RunLibrary(folder).refresh()


