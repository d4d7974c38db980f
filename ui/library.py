"""Saved runs for the app: RunResult JSON files summarised into table rows (cached per file, refreshed when a file
changes) and loaded by run id. Bad files are reported, never fatal."""
from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from pipeline.core.schema import RunResult
from pipeline.store.files import RUN_ID, TIMELINE_SUFFIX, read_run_file
from pipeline.store.timeline import step_times

_BAD_ID = "its run id {!r} is not a plain id (letters, digits, '_', '.', '-'), so no link could open it"
NO_MODEL = "no model"


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
    """A mode as lists and comparisons name it; the extractive mode says it used no model."""
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
    date: str = ""
    status: str
    findings: int
    rejected: int
    answered: int = 0
    planned: int = 0
    problems: int
    cost_usd: float
    seconds: float = 0.0
    file: str


def summarise(rr: RunResult, *, file: str, suite: str, mtime: float | None = None) -> RunSummary:
    """The table row of one run; coverage counts planned sub-questions with at least one passed-on finding."""
    plan = rr.plan
    answered_ids = {f.sub_question for f in rr.findings if f.support != "unsupported"}
    answered = sum(1 for sq in plan.sub_questions if sq.id in answered_ids) if plan else 0
    planned = (len(plan.sub_questions) + len(plan.not_researched)) if plan else 0
    return RunSummary(
        run_id=rr.run_id, question=rr.question, suite=suite, mode=rr.mode,
        models=models_label(rr.mode, rr.models), date=_run_date(rr, mtime), status=rr.status, findings=len(rr.findings),
        rejected=len(rr.rejected), answered=answered, planned=planned, problems=len(rr.problems),
        cost_usd=round(rr.usage.cost_usd, 6),
        seconds=round(rr.timings.get("total") or sum(step_times(rr).values()), 3), file=file,
    )


def _run_date(rr: RunResult, mtime: float | None) -> str:
    """When the run happened: its start time, else its last fetch (older files), else the file's time."""
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


class RunLibrary:
    """The RunResult files under one folder (a sub-folder names the suite); only changed files are parsed again."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._seen: dict[Path, tuple[tuple[int, int], RunSummary | str]] = {}
        self._by_id: dict[str, Path] = {}

    def refresh(self) -> tuple[list[RunSummary], list[tuple[str, str]]]:
        """Rows (newest first) and (file, reason) for each file that is not a RunResult; cheap when nothing changed."""
        with self._lock:
            found: dict[Path, tuple[int, int]] = {}
            for path in self._files():
                try:
                    st = path.stat()
                except OSError:
                    continue
                found[path] = (st.st_mtime_ns, st.st_size)
            for gone in set(self._seen) - set(found):
                del self._seen[gone]
            for path, sig in found.items():
                if path in self._seen and self._seen[path][0] == sig:
                    continue
                rel = path.relative_to(self.folder)
                suite = rel.parts[0] if len(rel.parts) > 1 else "default"
                try:
                    rr = read_run_file(path)
                    entry: RunSummary | str = summarise(rr, file=str(rel), suite=suite, mtime=sig[0] / 1e9) \
                        if RUN_ID.match(rr.run_id) else _BAD_ID.format(rr.run_id[:80])
                except (ValidationError, OSError, ValueError) as e:
                    entry = _reason(e)
                self._seen[path] = (sig, entry)
            rows = [seen for _, seen in self._seen.values() if isinstance(seen, RunSummary)]
            errors = sorted((str(p.relative_to(self.folder)), seen) for p, (_, seen) in self._seen.items()
                            if isinstance(seen, str))
            self._by_id = {}
            for path, (_, seen) in sorted(self._seen.items()):
                if isinstance(seen, RunSummary):
                    self._by_id.setdefault(seen.run_id, path)
        rows.sort(key=lambda r: (r.date, r.run_id), reverse=True)
        return rows, errors

    def _files(self) -> Iterable[Path]:
        if not self.folder.is_dir():
            return []
        return (p for p in self.folder.rglob("*.json") if not p.name.endswith(TIMELINE_SUFFIX) and p.is_file())

    def path_of(self, run_id: str) -> Path | None:
        """The file holding `run_id`, as of the last refresh."""
        with self._lock:
            return self._by_id.get(run_id)

    def load(self, run_id: str) -> RunResult | None:
        """The full RunResult of `run_id`, or None when no valid file holds it."""
        path = self.path_of(run_id)
        if path is None:
            self.refresh()
            path = self.path_of(run_id)
        try:
            return read_run_file(path) if path else None
        except (ValidationError, OSError, ValueError):
            return None


def load_saved_runs(folder: Path) -> tuple[list[RunSummary], list[tuple[str, str]]]:
    """Summaries of every valid RunResult file in `folder` (and its sub-folders), and (file, reason) for the rest."""
    return RunLibrary(folder).refresh()


