"""A suite's figures from its grades: per mode (the BM25 baseline among them), over all questions and per split."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import fmean
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field

from pipeline.bench.grade import BASELINE, Graded, RunGrade
from pipeline.bench.suite import Split

SPLITS: tuple[str, ...] = get_args(Split)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModeSummary(_Model):
    """The runs of one mode: means of the measured shares, pass rate, and pass^k per expectation."""

    mode: Graded
    runs: int
    questions: int
    repeats: int
    citation_precision: float | None = None
    gold_page_recall: float | None = None
    answer_recall: float | None = None
    sentences_cited: float | None = None
    numbers_in_quotes: float | None = None
    pass_rate: float | None = None
    pass_k: float | None = Field(None, description="Share of questions whose every repeat passes every expectation.")
    expectation_rate: dict[str, float] = Field(default_factory=dict)
    expectation_pass_k: dict[str, float] = Field(default_factory=dict)
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    wall_seconds_mean: float | None = None
    failed_questions: dict[str, list[str]] = Field(default_factory=dict)


class SuiteSummary(_Model):
    """Per mode (the baseline among them), over all questions and per split (dev: tuning allowed; test: held out)."""

    repeats: int
    modes: dict[str, ModeSummary] = Field(default_factory=dict)
    splits: dict[str, dict[str, ModeSummary]] = Field(default_factory=dict)


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(fmean(present), 4) if present else None


def grade_suite(grades: Sequence[RunGrade], repeats: int) -> SuiteSummary:
    """Per mode, over every question and per split: means, pass rate, and pass^k (a question passes^k when each of
    its `repeats` runs passes). Baseline grades (mode "baseline") are summarised like a mode."""
    splits = {split: by_mode([g for g in grades if g.split == split], repeats) for split in SPLITS}
    return SuiteSummary(repeats=repeats, modes=by_mode(grades, repeats),
                        splits={split: modes for split, modes in splits.items() if modes})


def by_mode(grades: Sequence[RunGrade], repeats: int) -> dict[str, ModeSummary]:
    """One ModeSummary per mode of `grades`, by mode name."""
    grouped: dict[str, list[RunGrade]] = defaultdict(list)
    for g in grades:
        grouped[g.mode].append(g)
    modes: dict[str, ModeSummary] = {}
    for mode, runs in sorted(grouped.items()):
        k = 1 if mode == BASELINE else repeats  # the baseline is computed once: it has no repeats
        per_question: dict[str, list[RunGrade]] = defaultdict(list)
        for g in runs:
            per_question[g.question_id].append(g)
        names = sorted({e.name for g in runs for e in g.expectations})
        rate: dict[str, float] = {}
        pass_k: dict[str, float] = {}
        for name in names:
            verdicts = [e.passed for g in runs for e in g.expectations if e.name == name]
            rate[name] = round(sum(verdicts) / len(verdicts), 4)
            holders = [gs for gs in per_question.values() if any(e.name == name for g in gs for e in g.expectations)]
            pass_k[name] = round(sum(_passes_k(gs, k, name) for gs in holders) / len(holders), 4)
        modes[mode] = ModeSummary(
            mode=runs[0].mode, runs=len(runs), questions=len(per_question), repeats=k,
            citation_precision=_mean([g.citation_precision for g in runs]),
            gold_page_recall=_mean([g.gold_page_recall for g in runs]),
            answer_recall=_mean([g.answer_recall for g in runs]),
            sentences_cited=_mean([g.sentences_cited for g in runs]),
            numbers_in_quotes=_mean([g.numbers_in_quotes for g in runs]),
            pass_rate=_mean([1.0 if g.passed else 0.0 for g in runs]),
            pass_k=_mean([1.0 if _passes_k(gs, k, None) else 0.0 for gs in per_question.values()]),
            expectation_rate=rate, expectation_pass_k=pass_k,
            cost_usd=round(sum(g.cost_usd for g in runs), 6), input_tokens=sum(g.input_tokens for g in runs),
            output_tokens=sum(g.output_tokens for g in runs), model_calls=sum(g.model_calls for g in runs),
            wall_seconds_mean=_mean([g.wall_seconds for g in runs]),
            failed_questions={q: sorted({n for g in gs for n in g.failed()} | ({"run_failed"} if any(
                g.status == "failed" for g in gs) else set())) for q, gs in sorted(per_question.items())
                if not all(g.passed for g in gs)},
        )
    return modes


def _passes_k(runs: list[RunGrade], repeats: int, name: str | None) -> bool:
    """Every one of at least `repeats` runs passes expectation `name` (or, for None, the whole question)."""
    if len(runs) < repeats:
        return False
    if name is None:
        return all(g.passed for g in runs)
    return all(any(e.name == name and e.passed for e in g.expectations) for g in runs)
