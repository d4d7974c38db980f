"""What an MCP caller may ask for, and the server-side limits that bound it.

A caller picks a budget preset by name; it never sends limits. Each preset maps to BudgetLimits defined here, and
every preset is then capped field by field by the server's cap: the project's default BudgetLimits with its dollar
ceiling set by RESEARCH_MCP_MAX_USD. Extractive runs call no model, so their model limits are zero. The limits and
every setting come from the server's environment when it starts; no tool takes them.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.config import ConfigError
from pipeline.core.schema import BudgetLimits, Mode

PresetName = Literal["small", "standard", "large"]
DEFAULT_PRESET: PresetName = "standard"
MAX_QUESTION_CHARS = 2_000
MAX_QUERY_CHARS = 400
MAX_RUN_ID_CHARS = 64
MAX_SEARCH_RESULTS = 20
MAX_LISTED_RUNS = 100
MAX_PAGE_CHARS = 100_000  # page text returned by fetch_page; the full length is reported beside it
_RUN_ID = re.compile(r"[A-Za-z0-9_-]+")

PRESETS: dict[PresetName, BudgetLimits] = {
    "small": BudgetLimits(searches=8, fetches=10, model_calls=30, input_tokens=400_000, output_tokens=40_000,
                          cost_usd=0.25),
    "standard": BudgetLimits(searches=16, fetches=20, model_calls=50, input_tokens=900_000, output_tokens=90_000,
                             cost_usd=0.75),
    "large": BudgetLimits(),  # the project's default limits
}
_CAPPED = ("searches", "fetches", "model_calls", "input_tokens", "output_tokens", "cost_usd")
_NO_MODEL = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}


class McpSettings(BaseSettings):
    """The MCP server's own settings, read once from its environment when it starts."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    max_usd: float = Field(BudgetLimits().cost_usd, ge=0.0, allow_inf_nan=False,
                           validation_alias=AliasChoices("RESEARCH_MCP_MAX_USD"))
    max_concurrent: int = Field(2, ge=1, le=16, validation_alias=AliasChoices("RESEARCH_MCP_MAX_CONCURRENT"))
    # The documents folders a caller may research, by name (pipeline/mcp/docs.py reads the list).
    docs: str = Field("", validation_alias=AliasChoices("RESEARCH_MCP_DOCS"))

    @classmethod
    def from_env(cls) -> McpSettings:
        """The settings, or a ConfigError naming the variable whose value is invalid."""
        try:
            return cls()
        except ValidationError as e:
            err = e.errors()[0]
            field = str(err["loc"][0]) if err.get("loc") else "a setting"
            name = {"max_usd": "RESEARCH_MCP_MAX_USD", "max_concurrent": "RESEARCH_MCP_MAX_CONCURRENT"}.get(field,
                                                                                                         field)
            raise ConfigError(f"invalid environment value for {name}: {err['msg']}") from None

    def cap(self) -> BudgetLimits:
        """The most any run of this server may use: the default limits, in dollars at most RESEARCH_MCP_MAX_USD."""
        return BudgetLimits().model_copy(update={"cost_usd": self.max_usd})


def limits_for(preset: PresetName, mode: Mode, cap: BudgetLimits) -> BudgetLimits:
    """The limits of a run in `mode` with `preset`: the preset's, each capped by `cap`; no model use when extractive."""
    chosen = PRESETS[preset]
    capped = {name: min(getattr(chosen, name), getattr(cap, name)) for name in _CAPPED}
    if mode == "extractive":
        capped.update(_NO_MODEL)
    return chosen.model_copy(update=capped)


def within(limits: BudgetLimits, cap: BudgetLimits) -> bool:
    """Whether every capped limit of `limits` is at most the cap's."""
    return all(getattr(limits, name) <= getattr(cap, name) for name in _CAPPED)


def describe_presets(cap: BudgetLimits) -> str:
    """One line per preset as this server applies it (for the research tool's description)."""
    lines = []
    for name in PRESETS:
        lim = limits_for(name, "fixed", cap)
        lines.append(f"{name}: up to {lim.searches} searches, {lim.fetches} fetches, {lim.model_calls} model calls, "
                     f"${lim.cost_usd:.2f}")
    return "; ".join(lines)


class Refused(ValueError):
    """A tool argument this server does not accept; the message says which and why."""


def checked_question(question: str) -> str:
    """The question with its whitespace collapsed; Refused when empty or longer than MAX_QUESTION_CHARS."""
    text = " ".join(question.split())
    if not text:
        raise Refused("the question is empty; pass the question to research")
    if len(text) > MAX_QUESTION_CHARS:
        raise Refused(f"the question is {len(text):,} characters long; the limit is {MAX_QUESTION_CHARS:,}. Ask a "
                      "shorter question")
    return text


def checked_query(query: str) -> str:
    """The search query with its whitespace collapsed; Refused when empty or longer than MAX_QUERY_CHARS."""
    text = " ".join(query.split())
    if not text:
        raise Refused("the query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise Refused(f"the query is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}")
    return text


def checked_run_id(run_id: str) -> str:
    """A run id as the store writes them (letters, digits, - and _); Refused otherwise."""
    run_id = run_id.strip()
    if not run_id or len(run_id) > MAX_RUN_ID_CHARS or not _RUN_ID.fullmatch(run_id):
        raise Refused(f"{_shown(run_id)} is not a run id; list_runs gives the ids of the recorded runs")
    return run_id


def _shown(text: str, width: int = 40) -> str:
    """`text` quoted for a message, cut to `width` characters."""
    return repr(text if len(text) <= width else text[:width] + "…")
