"""One thread-safe budget ledger per run: hard ceilings, a reserve for the later steps, refusals not exceptions."""
from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol

from pipeline.core.schema import BudgetLimits, BudgetState, ModelPrice, Usage

Counter = Literal["searches", "fetches", "documents"]
MIN_OUTPUT_TOKENS = 256


class Phase(StrEnum):
    """Research may spend only what is left after the reserve; synthesis (analyst, writer, reviewer) may spend all."""

    RESEARCH = "research"
    SYNTHESIS = "synthesis"


class TokenUsage(Protocol):
    """What the SDK's `usage` object (or our Usage) provides."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...

    @property
    def cache_read_input_tokens(self) -> int | None: ...

    @property
    def cache_creation_input_tokens(self) -> int | None: ...


@dataclass(frozen=True)
class Refusal:
    """The budget said no; `message` is written for the model or the user to act on."""

    resource: str
    message: str


CANCELLED = Refusal("cancelled", "CANCELLED: the run was cancelled; stop now and record nothing more.")


@dataclass(frozen=True)
class Grant:
    """Permission for one model call; holds its worst-case cost until settled or released."""

    id: int
    model: str
    max_tokens: int
    held_input_tokens: int
    held_output_tokens: int
    held_usd: float


def cost_usd(price: ModelPrice, usage: TokenUsage) -> float:
    """Dollar cost of one call, with cache reads and cache writes priced separately."""
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + (usage.cache_creation_input_tokens or 0) * price.cache_write
        + (usage.cache_read_input_tokens or 0) * price.cache_read
    ) / 1_000_000


class Budget:
    """Ceilings on searches, fetches, document reads, model calls, tokens and dollars, shared by a run's threads."""

    def __init__(self, limits: BudgetLimits, price_of: Callable[[str], ModelPrice], used: Usage | None = None):
        self.limits = limits
        self._price_of = price_of
        self._used = used.model_copy() if used else Usage()
        self._held_calls = 0
        self._held_in = 0
        self._held_out = 0
        self._held_usd = 0.0
        self._grants: dict[int, Grant] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._cancelled = False

    @classmethod
    def from_state(cls, state: BudgetState, price_of: Callable[[str], ModelPrice]) -> Budget:
        """A ledger that continues from a saved state (resume)."""
        return cls(state.limits, price_of, state.used)

    def _ceiling(self, value: float, phase: Phase) -> float:
        return value * (1 - self.limits.reserve) if phase is Phase.RESEARCH else value

    def cancel(self) -> None:
        """Refuse every later search, fetch and model call, so the run winds down through its refusal paths."""
        with self._lock:
            self._cancelled = True

    @property
    def cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def spend(self, counter: Counter, phase: Phase = Phase.RESEARCH, n: int = 1) -> Refusal | None:
        """Take `n` searches or fetches; None when granted, a Refusal when the ceiling (after reserve) is reached."""
        with self._lock:
            if self._cancelled:
                return CANCELLED
            limit = int(self._ceiling(getattr(self.limits, counter), phase))
            used = getattr(self._used, counter)
            if used + n > limit:
                return Refusal(counter, f"BUDGET_EXHAUSTED: the {counter} budget for {phase.value} is spent "
                                        f"({used} of {limit} used); record what you can support and stop.")
            setattr(self._used, counter, used + n)
            return None

    def remaining(self, counter: Counter, phase: Phase = Phase.RESEARCH) -> int:
        """How many searches or fetches `phase` may still take."""
        with self._lock:
            if self._cancelled:
                return 0
            return max(0, int(self._ceiling(getattr(self.limits, counter), phase)) - getattr(self._used, counter))

    def authorize_call(
        self, model: str, *, input_tokens: int, max_tokens: int, phase: Phase = Phase.RESEARCH
    ) -> Grant | Refusal:
        """Reserve one model call at its worst-case cost; `max_tokens` may come back lowered to what still fits."""
        price = self._price_of(model)
        worst_in_price = max(price.input, price.cache_write) / 1_000_000
        out_price = price.output / 1_000_000
        with self._lock:
            if self._cancelled:
                return CANCELLED
            lim, u = self.limits, self._used
            calls_left = self._ceiling(lim.model_calls, phase) - u.model_calls - self._held_calls
            in_used = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
            in_left = self._ceiling(lim.input_tokens, phase) - in_used - self._held_in
            out_left = self._ceiling(lim.output_tokens, phase) - u.output_tokens - self._held_out
            usd_left = self._ceiling(lim.cost_usd, phase) - u.cost_usd - self._held_usd
            if calls_left < 1:
                return Refusal("model_calls", f"BUDGET_EXHAUSTED: no model calls left for {phase.value}.")
            if input_tokens > in_left:
                return Refusal("input_tokens", f"BUDGET_EXHAUSTED: input-token budget for {phase.value} is spent.")
            usd_for_output = usd_left - input_tokens * worst_in_price
            affordable = int(min(max_tokens, out_left, usd_for_output / out_price if out_price else max_tokens))
            if affordable < min(MIN_OUTPUT_TOKENS, max_tokens):
                resource = "output_tokens" if out_left < usd_for_output / (out_price or 1) else "cost_usd"
                return Refusal(resource, f"BUDGET_EXHAUSTED: the {resource} budget for {phase.value} is spent.")
            grant = Grant(next(self._ids), model, affordable, input_tokens, affordable,
                          input_tokens * worst_in_price + affordable * out_price)
            self._grants[grant.id] = grant
            self._held_calls += 1
            self._held_in += grant.held_input_tokens
            self._held_out += grant.held_output_tokens
            self._held_usd += grant.held_usd
            return grant

    def _drop_hold(self, grant: Grant) -> bool:
        if self._grants.pop(grant.id, None) is None:
            return False
        self._held_calls -= 1
        self._held_in -= grant.held_input_tokens
        self._held_out -= grant.held_output_tokens
        self._held_usd -= grant.held_usd
        return True

    def settle(self, grant: Grant, usage: TokenUsage) -> float:
        """Replace the hold with the real usage of the call; returns its dollar cost. Settling twice is an error."""
        cost = cost_usd(self._price_of(grant.model), usage)
        with self._lock:
            if not self._drop_hold(grant):
                raise ValueError(f"grant {grant.id} was already settled or released")
            self._add(usage, cost)
        return cost

    def book(self, model: str, usage: TokenUsage) -> float:
        """Record a call that was already paid for (served from a recording): no ceiling applies; returns its cost."""
        cost = cost_usd(self._price_of(model), usage)
        with self._lock:
            self._add(usage, cost)
        return cost

    def _add(self, usage: TokenUsage, cost: float) -> None:
        u = self._used
        u.model_calls += 1
        u.input_tokens += usage.input_tokens
        u.output_tokens += usage.output_tokens
        u.cache_read_input_tokens += usage.cache_read_input_tokens or 0
        u.cache_creation_input_tokens += usage.cache_creation_input_tokens or 0
        u.cost_usd = round(u.cost_usd + cost, 10)

    def book_unit(self, counter: Counter) -> None:
        """Record a search or fetch that was already made (served from a recording); no ceiling applies."""
        with self._lock:
            setattr(self._used, counter, getattr(self._used, counter) + 1)

    def release(self, grant: Grant) -> None:
        """Give back a hold for a call that produced no usage (it failed before the model ran)."""
        with self._lock:
            self._drop_hold(grant)

    def used(self) -> Usage:
        """A copy of what has been spent so far (holds excluded)."""
        with self._lock:
            return self._used.model_copy()

    def state(self) -> BudgetState:
        """Limits and usage, for the RunResult and for checkpoints."""
        with self._lock:
            return BudgetState(limits=self.limits.model_copy(), used=self._used.model_copy())

    def exhausted(self, phase: Phase = Phase.RESEARCH) -> bool:
        """True when no model call of any size would be granted in `phase`."""
        with self._lock:
            lim, u = self.limits, self._used
            return self._cancelled or (
                u.model_calls + self._held_calls >= self._ceiling(lim.model_calls, phase)
                or u.cost_usd + self._held_usd >= self._ceiling(lim.cost_usd, phase)
            )
