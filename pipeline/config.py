"""Settings from the environment (the names the README documents) and the model price table."""
from __future__ import annotations

import json
import os
import tempfile
from functools import cached_property
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.core.schema import ModelPrice
from pipeline.models.pricing import DEFAULT_PRICES

# Each name has one entry in web/search/registry.py (its factory, required setting and keys); a test checks both
# lists agree. Keys are SecretStr fields: the run store scrubs every SecretStr setting from what it records.
# The frozen webs shipped with the project; with no search provider configured, runs search the `news` one.
SHIPPED_CORPORA = Path(__file__).resolve().parents[1] / "benchmarks" / "corpora"
SearchProviderName = Literal["brave", "tavily", "searxng", "anthropic", "corpus"]
# anthropic: the Messages API; openai: any OpenAI-compatible Chat Completions endpoint (OpenAI, OpenRouter, vLLM,
# llama.cpp's server, Ollama), pointed at by OPENAI_BASE_URL.
ModelProviderName = Literal["anthropic", "openai"]


class ConfigError(RuntimeError):
    """A setting is missing or invalid; the message names the variable to set."""


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


def _user_cache() -> Path:
    """The platform's user cache folder for this program: $XDG_CACHE_HOME/verbatim, else ~/.cache/verbatim."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if base and Path(base).is_absolute():
        return Path(base) / "verbatim"
    try:
        return Path.home() / ".cache" / "verbatim"
    except RuntimeError:  # no home folder (a bare container user): the system's temporary folder
        return Path(tempfile.gettempdir()) / "verbatim-cache"


class Settings(BaseSettings):
    """Everything configurable, read once from the environment."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    anthropic_api_key: SecretStr | None = Field(None, validation_alias=_env("ANTHROPIC_API_KEY"))
    anthropic_base_url: str | None = Field(None, validation_alias=_env("ANTHROPIC_BASE_URL"))
    model_provider: ModelProviderName = Field("anthropic", validation_alias=_env("RESEARCH_MODEL_PROVIDER"))
    openai_api_key: SecretStr | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=_env("OPENAI_BASE_URL"))
    lead_model: str = Field("claude-sonnet-5-5", validation_alias=_env("RESEARCH_LEAD_MODEL"))
    worker_model: str = Field("claude-haiku-5-5", validation_alias=_env("RESEARCH_WORKER_MODEL"))
    # Seconds; the SDK retries 429/5xx/529 itself, bounded by max_retries and this timeout.
    model_timeout: float = Field(120.0, validation_alias=_env("RESEARCH_MODEL_TIMEOUT"))
    model_max_retries: int = Field(3, validation_alias=_env("RESEARCH_MODEL_MAX_RETRIES"))

    search_provider: SearchProviderName = Field("corpus", validation_alias=_env("RESEARCH_SEARCH_PROVIDER"))
    brave_api_key: SecretStr | None = Field(None, validation_alias=_env("BRAVE_API_KEY"))
    tavily_api_key: SecretStr | None = Field(None, validation_alias=_env("TAVILY_API_KEY"))
    searxng_url: str | None = Field(None, validation_alias=_env("RESEARCH_SEARXNG_URL"))
    search_base_url: str | None = Field(None, validation_alias=_env("RESEARCH_SEARCH_BASE_URL"))
    corpus_dir: str = Field(str(SHIPPED_CORPORA / "news"), validation_alias=_env("RESEARCH_CORPUS_DIR"))
    # The user's own files (`run --docs DIR`): searched alone, or beside the web when RESEARCH_SEARCH_PROVIDER is set.
    docs_dir: str | None = Field(None, validation_alias=_env("RESEARCH_DOCS_DIR"))
    docs_max_bytes: int = Field(100_000_000, gt=0, validation_alias=_env("RESEARCH_DOCS_MAX_BYTES"))
    # Where indexes of documents folders are kept (never inside the folder itself).
    cache_dir: str = Field(default_factory=lambda: str(_user_cache()), validation_alias=_env("RESEARCH_CACHE_DIR"))

    fetch_allow_raw: str = Field("", validation_alias=_env("RESEARCH_FETCH_ALLOW"))
    fetch_ports_raw: str = Field("80,443", validation_alias=_env("RESEARCH_FETCH_PORTS"))
    fetch_max_bytes: int = Field(5_000_000, validation_alias=_env("RESEARCH_FETCH_MAX_BYTES"))
    fetch_deadline: float = Field(20.0, validation_alias=_env("RESEARCH_FETCH_DEADLINE"))

    # A SQLite file path, or a postgresql:// URL (its password is masked in every message and scrubbed from records).
    db_path: str = Field("runs/research.sqlite", validation_alias=_env("RESEARCH_DB"))
    heartbeat_stale: float = Field(60.0, gt=0, validation_alias=_env("RESEARCH_HEARTBEAT_STALE"))
    prices_raw: str = Field("", validation_alias=_env("RESEARCH_PRICES"))

    @field_validator("search_provider", "model_provider", mode="before")
    @classmethod
    def _lower(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v

    @cached_property
    def fetch_allow(self) -> frozenset[str]:
        """Exact lower-cased `host:port` pairs that may be fetched although not public."""
        return frozenset(p.strip().lower() for p in self.fetch_allow_raw.split(",") if p.strip())

    @cached_property
    def fetch_ports(self) -> frozenset[int]:
        try:
            return frozenset(int(p) for p in self.fetch_ports_raw.split(",") if p.strip())
        except ValueError as e:
            raise ConfigError(f"RESEARCH_FETCH_PORTS must be comma-separated port numbers: {e}") from None

    @cached_property
    def prices(self) -> dict[str, ModelPrice]:
        """The default price table with RESEARCH_PRICES merged over it."""
        table = dict(DEFAULT_PRICES)
        if self.prices_raw.strip():
            try:
                extra = json.loads(self.prices_raw)
                table.update({k: ModelPrice.model_validate(v) for k, v in extra.items()})
            except (ValueError, AttributeError) as e:
                raise ConfigError(
                    'RESEARCH_PRICES must be JSON like {"model-id": {"input": 3, "output": 15, '
                    f'"cache_write": 3.75, "cache_read": 0.3}}: {e}'
                ) from None
        return table

    def price(self, model: str) -> ModelPrice:
        """The price of `model`; unknown models are refused so spend is never uncounted."""
        try:
            return self.prices[model]
        except KeyError:
            raise ConfigError(
                f"No price for model {model!r}. Add it to RESEARCH_PRICES, or use one of: "
                + ", ".join(sorted(self.prices))
            ) from None

    def require_model_access(self) -> None:
        """Raise a ConfigError naming the variable when a live run cannot reach a model."""
        if self.model_provider == "openai":
            self._require_openai()
        elif self.anthropic_api_key is None or not self.anthropic_api_key.get_secret_value().strip():
            raise ConfigError(
                "Set ANTHROPIC_API_KEY to run live research (or browse saved runs, which need no key)."
            )
        for model in (self.lead_model, self.worker_model):
            self.price(model)

    def url_secrets(self) -> list[str]:
        """Passwords written into endpoint URLs (https://user:password@proxy/v1), as written and decoded: the run
        store scrubs them like keys."""
        found: list[str] = []
        for url in (self.anthropic_base_url, self.openai_base_url, self.search_base_url, self.searxng_url):
            password = urlsplit(url).password if url else None
            if password:
                found += sorted({password, unquote(password)})
        return found

    def model_access_names(self) -> str:
        """The settings that decide whether the configured model provider can be reached, for error messages."""
        return "OPENAI_API_KEY and OPENAI_BASE_URL" if self.model_provider == "openai" else "ANTHROPIC_API_KEY"

    def _require_openai(self) -> None:
        # A local server (OPENAI_BASE_URL) usually takes no key; OpenAI's own API always does.
        if not self.openai_base_url and not (self.openai_api_key and self.openai_api_key.get_secret_value().strip()):
            raise ConfigError("RESEARCH_MODEL_PROVIDER=openai needs OPENAI_API_KEY (for OpenAI itself), or "
                              "OPENAI_BASE_URL pointing at an OpenAI-compatible server such as vLLM or Ollama.")
        if self.openai_base_url and urlsplit(self.openai_base_url).scheme not in ("http", "https"):
            raise ConfigError(f"OPENAI_BASE_URL must be an http:// or https:// URL, usually ending in /v1 (for example "
                              f"http://localhost:11434/v1), not {self.openai_base_url!r}")
        unset = [name for name, field in (("RESEARCH_LEAD_MODEL", "lead_model"),
                                          ("RESEARCH_WORKER_MODEL", "worker_model"))
                 if field not in self.model_fields_set]
        if unset:  # the defaults are Claude model ids, which an OpenAI-compatible endpoint does not serve
            raise ConfigError(f"RESEARCH_MODEL_PROVIDER=openai needs {' and '.join(unset)} set to model ids the "
                              "endpoint serves (and their prices in RESEARCH_PRICES when they are not in the table)")
