"""Settings from the environment and the RunResult JSON contract."""
from __future__ import annotations

import json

import pytest

from pipeline.config import ConfigError, Settings
from pipeline.core.schema import FetchResult, Finding, RunResult, Source
from pipeline.models.pricing import DEFAULT_PRICES
from pipeline.web.search.registry import require_search_access


def test_environment_names_from_design(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-test-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "RESEARCH_LEAD_MODEL": "claude-opus-5-5", "RESEARCH_WORKER_MODEL": "claude-sonnet-5-5",
        "RESEARCH_SEARCH_PROVIDER": "Brave", "BRAVE_API_KEY": "b", "TAVILY_API_KEY": "t",
        "RESEARCH_SEARXNG_URL": "http://127.0.0.1:8888", "RESEARCH_SEARCH_BASE_URL": "http://127.0.0.1:7",
        "RESEARCH_FETCH_ALLOW": "127.0.0.1:8080, LOCALHOST:9000", "RESEARCH_DB": "/tmp/x.sqlite",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = Settings()
    assert s.anthropic_api_key is not None and s.anthropic_api_key.get_secret_value() == "sk-ant-test-key"
    assert "sk-ant-test-key" not in repr(s)
    assert (s.lead_model, s.worker_model, s.search_provider) == ("claude-opus-5-5", "claude-sonnet-5-5", "brave")
    assert s.fetch_allow == {"127.0.0.1:8080", "localhost:9000"}
    assert s.db_path == "/tmp/x.sqlite" and s.search_base_url == "http://127.0.0.1:7"


def test_defaults_need_no_keys() -> None:
    s = Settings()
    assert s.lead_model == "claude-sonnet-5-5" and s.worker_model == "claude-haiku-5-5"
    assert s.search_provider == "corpus" and s.fetch_allow == frozenset() and s.fetch_ports == {80, 443}


def test_live_run_without_key_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        Settings().require_model_access()


@pytest.mark.parametrize("provider,var", [("brave", "BRAVE_API_KEY"), ("tavily", "TAVILY_API_KEY"),
                                          ("searxng", "RESEARCH_SEARXNG_URL"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_search_provider_without_key_names_the_variable(provider: str, var: str) -> None:
    with pytest.raises(ConfigError, match=var):
        require_search_access(Settings(search_provider=provider))


def test_price_table_has_the_three_models_and_is_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5-5"} <= set(DEFAULT_PRICES)
    for model, p in DEFAULT_PRICES.items():
        # Anthropic bills cache writes above the input price; OpenAI bills none, so a cached prefix costs the input.
        assert p.cache_read < p.input < p.output
        assert p.cache_write > p.input if model.startswith("claude-") else p.cache_write == p.input
    monkeypatch.setenv("RESEARCH_PRICES", json.dumps(
        {"claude-haiku-5-5": {"input": 2, "output": 9, "cache_write": 2.5, "cache_read": 0.2},
         "my-model": {"input": 1, "output": 1, "cache_write": 1, "cache_read": 1}}))
    s = Settings()
    assert s.price("claude-haiku-5-5").output == 9 and s.price("my-model").input == 1
    assert s.price("claude-sonnet-5-5") == DEFAULT_PRICES["claude-sonnet-5-5"]


def test_bad_price_override_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_PRICES", "{not json")
    with pytest.raises(ConfigError, match="RESEARCH_PRICES"):
        Settings().price("claude-haiku-5-5")


def test_run_result_json_has_the_contract_keys() -> None:
    rr = RunResult(
        run_id="r1", question="q", mode="fixed", status="complete",
        sources=[Source(id="S1", url="https://a.org", final_url="https://a.org/", title="A", published=None,
                        fetched_at="2026-11-30T00:00:00+00:00", sha256="0" * 64, chars=10)],
        findings=[Finding(id="F1", sub_question="Q1", source="S1", claim="c", quote="q" * 15, start=0, end=15)],
    )
    data = json.loads(rr.model_dump_json())
    assert set(data) >= {"run_id", "question", "mode", "models", "status", "plan", "sources", "findings",
                         "rejected", "report", "problems", "budget", "usage", "timings"}
    assert set(data["report"]) >= {"markdown", "gaps", "conflicts"}
    assert set(data["budget"]) == {"limits", "used"}
    assert set(data["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens",
                                  "cache_creation_input_tokens", "cost_usd", "model_calls", "searches", "fetches"}
    assert set(data["sources"][0]) >= {"id", "url", "final_url", "title", "published", "fetched_at", "sha256", "chars"}
    assert set(data["findings"][0]) >= {"id", "sub_question", "source", "claim", "quote", "start", "end",
                                        "confidence", "support"}
    assert RunResult.model_validate_json(rr.model_dump_json()) == rr


def test_fetch_result_json_has_the_contract_keys() -> None:
    keys = set(json.loads(FetchResult(ok=False, url="x", error_kind="blocked", error="e").model_dump_json()))
    assert keys == {"ok", "error_kind", "error", "url", "final_url", "status", "content_type", "title", "text",
                    "published", "truncated", "bytes"}
