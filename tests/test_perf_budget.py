"""The performance budget: benchmarks/perf/pipeline_bench.py's count figures held to benchmarks/perf/budgets.json
(tokens, cost-weighted tokens, model calls, sequential rounds from the recorded events; never times), and the
rounds counter itself."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from pipeline.bench.rounds import sequential_rounds
from pipeline.core.event_types import Event, ModelErrorEvent, ModelRequestEvent, ModelResponseEvent, StepEvent

REPO = Path(__file__).resolve().parents[1]
BUDGETS = json.loads((REPO / "benchmarks/perf/budgets.json").read_text("utf-8"))
# Long enough that calls sent together are all sent before the first is answered, on a loaded machine too.
LATENCY = 0.1


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pipeline_bench", REPO / "benchmarks/perf/pipeline_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def figures() -> dict[str, dict[str, object]]:
    return _bench().measure(LATENCY)


@pytest.mark.parametrize("mode", ["tools", "fixed"])
def test_counts_stay_within_budget(figures: dict[str, dict[str, object]], mode: str) -> None:
    got, budget = figures[mode], BUDGETS["pipeline"][mode]
    assert got["status"] == "complete"
    over = {k: (got[k], limit) for k, limit in budget["max"].items() if got[k] > limit}  # type: ignore[operator]
    under = {k: (got[k], floor) for k, floor in budget["min"].items() if got[k] < floor}  # type: ignore[operator]
    assert not over, f"{mode}: over budget (figure, budget): {over}; benchmarks/perf/budgets.json"
    assert not under, f"{mode}: fewer than the budget's floor (figure, floor): {under}"


def test_cost_weighting_is_as_billed() -> None:
    from pipeline.core.schema import Usage
    usage = Usage(input_tokens=1000, cache_creation_input_tokens=800, cache_read_input_tokens=10_000)
    assert _bench().cost_weighted(usage) == 1000 + 1000 + 1000


def _call(purpose: str) -> ModelRequestEvent:
    return ModelRequestEvent(purpose=purpose, model="m")


def _answer(purpose: str) -> ModelResponseEvent:
    return ModelResponseEvent(purpose=purpose, model="m", response={})


def test_calls_sent_together_are_one_round() -> None:
    events: list[Event] = [_call("planner:0"), _call("planner:1"), _answer("planner:1"), _answer("planner:0")]
    assert sequential_rounds(events) == 1


def test_a_call_after_an_answer_is_the_next_round() -> None:
    events: list[Event] = [_call("planner:0"), _answer("planner:0"), StepEvent(name="plan"),
                           _call("worker:sq1"), _call("worker:sq2"), _answer("worker:sq2"),
                           _call("worker:sq2"), _answer("worker:sq1"), _answer("worker:sq2"), _call("writer")]
    # planner -> worker:sq2 -> worker:sq2 again -> writer; worker:sq1's single turn is not on the longest chain
    assert sequential_rounds(events) == 4


def test_a_failed_call_ends_its_round() -> None:
    events: list[Event] = [_call("writer"), ModelErrorEvent(purpose="writer", error_kind="overloaded"),
                           _call("writer"), _answer("writer")]
    assert sequential_rounds(events) == 2
    assert sequential_rounds([]) == 0
