"""Reads saved RunResult JSON files (benchmark_runs/) into summary rows for the app; bad files are reported, not fatal."""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ValidationError

from .schema import RunResult


class RunSummary(BaseModel):
    """One row of the benchmark table."""

    run_id: str
    question: str
    mode: str
    status: str
    findings: int
    rejected: int
    problems: int
    cost_usd: float
    file: str


def load_saved_runs(folder: Path) -> tuple[list[RunSummary], list[tuple[str, str]]]:
    """Summaries of every valid RunResult file in `folder`, and (file name, reason) for each file that is not."""
    rows: list[RunSummary] = []
    errors: list[tuple[str, str]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            rr = RunResult.model_validate_json(path.read_bytes())
        except (ValidationError, OSError, ValueError) as e:
            errors.append((path.name, str(e).splitlines()[0][:200]))
            continue
        rows.append(RunSummary(
            run_id=rr.run_id, question=rr.question, mode=rr.mode, status=rr.status,
            findings=len(rr.findings), rejected=len(rr.rejected), problems=len(rr.problems),
            cost_usd=rr.usage.cost_usd, file=path.name,
        ))
    return rows, errors
