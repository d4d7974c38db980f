"""The budget ledger: exact under races, priced from real usage with cache tokens, reserve held back from research."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from pipeline.config import Settings
from pipeline.core.budget import Budget, Grant, Phase, Refusal, cost_usd
from pipeline.core.schema import BudgetLimits, ModelPrice

PRICE = ModelPrice(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)


def price_of(model: str) -> ModelPrice:
    return PRICE


@dataclass
class FakeUsage:
    """The shape of the SDK's Usage object."""

    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int | None = 0
    cache_creation_input_tokens: int | None = 0


def test_eight_threads_racing_for_100_searches_get_exactly_100() -> None:
    budget = Budget(BudgetLimits(searches=100, reserve=0.0), price_of)
    granted: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        mine = 0
        for _ in range(50):
            if budget.spend("searches") is None:
                mine += 1
        with lock:
            granted.append(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) == 100
    assert budget.used().searches == 100
    assert isinstance(budget.spend("searches"), Refusal)


def test_eight_threads_racing_for_100_model_calls_get_exactly_100() -> None:
    budget = Budget(BudgetLimits(model_calls=100, cost_usd=1000, reserve=0.0), price_of)
    results: list[Grant | Refusal] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(30):
            g = budget.authorize_call("m", input_tokens=10, max_tokens=10)
            if isinstance(g, Grant):
                budget.settle(g, FakeUsage(10, 10))
            with lock:
                results.append(g)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(r, Grant) for r in results) == 100
    assert budget.used().model_calls == 100


def test_cost_prices_cache_reads_and_writes_separately() -> None:
    usage = FakeUsage(input_tokens=1_000, output_tokens=2_000, cache_read_input_tokens=10_000,
                      cache_creation_input_tokens=4_000)
    expected = (1_000 * 3.0 + 2_000 * 15.0 + 10_000 * 0.30 + 4_000 * 3.75) / 1_000_000
    assert cost_usd(PRICE, usage) == pytest.approx(expected)
    assert cost_usd(PRICE, FakeUsage(1_000, 0, None, None)) == pytest.approx(0.003)


def test_dollar_ceiling_stops_a_run_from_real_usage_including_cache_tokens() -> None:
    budget = Budget(BudgetLimits(cost_usd=1.00, reserve=0.0), price_of)
    calls = 0
    while True:
        g = budget.authorize_call("m", input_tokens=60_000, max_tokens=1_000)  # prompt estimate incl. cached prefix
        if isinstance(g, Refusal):
            break
        # Mostly cache reads: a ledger that ignored them would allow far more calls.
        budget.settle(g, FakeUsage(100, 500, cache_read_input_tokens=50_000, cache_creation_input_tokens=2_000))
        calls += 1
        assert calls < 100
    per_call = cost_usd(PRICE, FakeUsage(100, 500, 50_000, 2_000))
    assert g.resource == "cost_usd" and "BUDGET_EXHAUSTED" in g.message
    hold = 60_000 * 3.75 / 1e6 + 1_000 * 15.0 / 1e6  # worst case reserved before each call
    assert budget.used().cost_usd == pytest.approx(calls * per_call)
    assert budget.used().cost_usd <= 1.00
    assert calls == int((1.00 - hold) // per_call) + 1
    assert budget.used().cache_read_input_tokens == calls * 50_000


def test_grant_lowers_max_tokens_to_what_the_dollars_allow() -> None:
    budget = Budget(BudgetLimits(cost_usd=0.01, reserve=0.0), price_of)
    g = budget.authorize_call("m", input_tokens=1_000, max_tokens=10_000)
    assert isinstance(g, Grant)
    worst = 1_000 * 3.75 / 1e6 + g.max_tokens * 15.0 / 1e6
    assert g.max_tokens < 10_000 and worst <= 0.01 + 1e-9


def test_holds_count_against_concurrent_callers_until_settled() -> None:
    budget = Budget(BudgetLimits(model_calls=2, cost_usd=100, reserve=0.0), price_of)
    a = budget.authorize_call("m", input_tokens=10, max_tokens=10)
    b = budget.authorize_call("m", input_tokens=10, max_tokens=10)
    assert isinstance(a, Grant) and isinstance(b, Grant)
    assert isinstance(budget.authorize_call("m", input_tokens=10, max_tokens=10), Refusal)
    budget.release(b)
    assert isinstance(budget.authorize_call("m", input_tokens=10, max_tokens=10), Grant)
    budget.settle(a, FakeUsage(10, 10))
    with pytest.raises(ValueError):
        budget.settle(a, FakeUsage(10, 10))


def test_reserve_holds_back_research_but_not_synthesis() -> None:
    budget = Budget(BudgetLimits(fetches=10, model_calls=10, cost_usd=100, reserve=0.3), price_of)
    research_fetches = sum(budget.spend("fetches", Phase.RESEARCH) is None for _ in range(20))
    assert research_fetches == 7
    assert budget.spend("fetches", Phase.SYNTHESIS) is None
    research_calls = 0
    while isinstance(g := budget.authorize_call("m", input_tokens=10, max_tokens=10, phase=Phase.RESEARCH), Grant):
        budget.settle(g, FakeUsage(10, 10))
        research_calls += 1
    assert research_calls == 7
    assert budget.exhausted(Phase.RESEARCH) and not budget.exhausted(Phase.SYNTHESIS)
    synthesis_calls = 0
    while isinstance(g := budget.authorize_call("m", input_tokens=10, max_tokens=10, phase=Phase.SYNTHESIS), Grant):
        budget.settle(g, FakeUsage(10, 10))
        synthesis_calls += 1
    assert synthesis_calls == 3


def test_reserve_applies_to_dollars() -> None:
    budget = Budget(BudgetLimits(cost_usd=1.0, reserve=0.5), price_of)
    research = budget.authorize_call("m", input_tokens=0, max_tokens=40_000, phase=Phase.RESEARCH)
    assert isinstance(research, Grant) and research.max_tokens * 15.0 / 1e6 <= 0.5  # lowered to fit $0.50
    budget.release(research)
    synthesis = budget.authorize_call("m", input_tokens=0, max_tokens=40_000, phase=Phase.SYNTHESIS)
    assert isinstance(synthesis, Grant) and synthesis.max_tokens == 40_000


def test_input_token_ceiling_counts_cache_tokens() -> None:
    budget = Budget(BudgetLimits(input_tokens=10_000, cost_usd=100, reserve=0.0), price_of)
    g = budget.authorize_call("m", input_tokens=100, max_tokens=10)
    assert isinstance(g, Grant)
    budget.settle(g, FakeUsage(100, 10, cache_read_input_tokens=9_000, cache_creation_input_tokens=500))
    refusal = budget.authorize_call("m", input_tokens=1_000, max_tokens=10)
    assert isinstance(refusal, Refusal) and refusal.resource == "input_tokens"


def test_state_round_trips_for_resume() -> None:
    budget = Budget(BudgetLimits(searches=5, reserve=0.0), price_of)
    budget.spend("searches", n=3)
    resumed = Budget.from_state(budget.state(), price_of)
    assert resumed.used().searches == 3
    assert resumed.spend("searches", n=2) is None
    assert isinstance(resumed.spend("searches"), Refusal)


def test_unknown_model_is_refused_loudly() -> None:
    from pipeline.config import ConfigError

    budget = Budget(BudgetLimits(), Settings().price)
    with pytest.raises(ConfigError, match="RESEARCH_PRICES"):
        budget.authorize_call("no-such-model", input_tokens=1, max_tokens=1)


def test_remaining_counts_the_reserve_for_research_only() -> None:
    budget = Budget(BudgetLimits(fetches=10, reserve=0.3), price_of)
    budget.spend("fetches", n=5)
    assert budget.remaining("fetches", Phase.RESEARCH) == 2
    assert budget.remaining("fetches", Phase.SYNTHESIS) == 5
    budget.spend("fetches", Phase.SYNTHESIS, n=5)
    assert budget.remaining("fetches", Phase.RESEARCH) == 0


def test_booking_a_recorded_call_ignores_ceilings_but_counts_fully() -> None:
    budget = Budget(BudgetLimits(model_calls=1, searches=0, cost_usd=0.001, reserve=0.0), price_of)
    cost = budget.book("m", FakeUsage(1_000, 100, cache_read_input_tokens=500))
    budget.book_unit("searches")
    used = budget.used()
    assert (used.model_calls, used.searches, used.input_tokens) == (1, 1, 1_000)
    assert cost == pytest.approx(cost_usd(PRICE, FakeUsage(1_000, 100, 500))) == pytest.approx(used.cost_usd)
    assert isinstance(budget.authorize_call("m", input_tokens=1, max_tokens=1), Refusal)
