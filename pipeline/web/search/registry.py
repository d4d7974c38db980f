"""The search providers RESEARCH_SEARCH_PROVIDER may name: one entry each, holding everything known about it.

An entry is the provider's name, the factory that builds it from the settings, the setting it cannot work without
(and the variable that sets it), and the settings that hold its keys. make_provider and require_search_access read
the entries. Keys are declared in Settings as SecretStr, which is what the run store scrubs from every record;
tests check that every name here is in config.SearchProviderName and back, and that every secret is scrubbed.

To add a provider: its module in this folder, its settings in pipeline/config.py (keys as SecretStr), its name in
config.SearchProviderName, and its entry in PROVIDERS below.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from pydantic import SecretStr

from pipeline.config import ConfigError, Settings
from pipeline.web.corpus import Corpus, CorpusSearch
from pipeline.web.search.anthropic import AnthropicWebSearch, ServerWebSearch
from pipeline.web.search.base import SearchProvider, Sleep, default_http_client
from pipeline.web.search.brave import BraveSearch
from pipeline.web.search.searxng import SearxngSearch
from pipeline.web.search.tavily import TavilySearch

_OR_CORPUS = "set it, or use RESEARCH_SEARCH_PROVIDER=corpus for the offline saved-page index"


@dataclass(frozen=True)
class Wiring:
    """What a factory may use besides the settings.

    `server_web_search` and `model_errors` come from the model client (the `anthropic` provider searches through
    it); the web layer does not import the model layer, so the caller passes them.
    """

    http: httpx.Client | None = None
    sleep: Sleep = time.sleep
    server_web_search: ServerWebSearch | None = None
    model_errors: tuple[type[Exception], ...] = ()

    def client(self) -> httpx.Client:
        """The given HTTP client, or a production one."""
        return self.http or default_http_client()


@dataclass(frozen=True)
class Requirement:
    """A setting a provider cannot work without: its Settings field, its environment variable, how to fix it."""

    field: str
    env: str
    fix: str = _OR_CORPUS


@dataclass(frozen=True)
class ProviderEntry:
    """One search provider: name, factory, the setting it requires, and the Settings fields holding its keys."""

    name: str
    factory: Callable[[Settings, Wiring], SearchProvider]
    requires: Requirement | None = None
    secrets: tuple[str, ...] = ()

    def missing(self, settings: Settings) -> str | None:
        """The message naming the variable to set when `settings` lack the required setting, else None."""
        if self.requires is None:
            return None
        value = getattr(settings, self.requires.field)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if value:
            return None
        return f"RESEARCH_SEARCH_PROVIDER={self.name} needs {self.requires.env}; {self.requires.fix}."


def _secret(value: SecretStr | None) -> str:
    assert value is not None  # require_search_access ran first
    return value.get_secret_value()


def _brave(settings: Settings, wiring: Wiring) -> SearchProvider:
    return BraveSearch(_secret(settings.brave_api_key), wiring.client(), base_url=settings.search_base_url,
                       sleep=wiring.sleep)


def _tavily(settings: Settings, wiring: Wiring) -> SearchProvider:
    return TavilySearch(_secret(settings.tavily_api_key), wiring.client(), base_url=settings.search_base_url,
                        sleep=wiring.sleep)


def _searxng(settings: Settings, wiring: Wiring) -> SearchProvider:
    base = settings.search_base_url or settings.searxng_url
    assert base is not None  # require_search_access ran first
    return SearxngSearch(base, wiring.client(), sleep=wiring.sleep)


def _anthropic(settings: Settings, wiring: Wiring) -> SearchProvider:
    if wiring.server_web_search is None:
        raise ValueError("the anthropic provider searches through a model client: pass its server_web_search "
                         "and model_errors to make_provider")
    return AnthropicWebSearch(wiring.server_web_search, errors=wiring.model_errors)


def _corpus(settings: Settings, wiring: Wiring) -> SearchProvider:
    return CorpusSearch(Corpus.open(settings.corpus_dir))


# In the order of config.SearchProviderName.
PROVIDERS: dict[str, ProviderEntry] = {entry.name: entry for entry in (
    ProviderEntry("brave", _brave, Requirement("brave_api_key", "BRAVE_API_KEY"), secrets=("brave_api_key",)),
    ProviderEntry("tavily", _tavily, Requirement("tavily_api_key", "TAVILY_API_KEY"), secrets=("tavily_api_key",)),
    ProviderEntry("searxng", _searxng, Requirement("searxng_url", "RESEARCH_SEARXNG_URL")),
    ProviderEntry("anthropic", _anthropic, Requirement("anthropic_api_key", "ANTHROPIC_API_KEY"),
                  secrets=("anthropic_api_key",)),
    ProviderEntry("corpus", _corpus, Requirement("corpus_dir", "RESEARCH_CORPUS_DIR",
                                                 "set it to a folder of saved pages with its manifest.jsonl")),
)}


def provider_entry(name: str) -> ProviderEntry:
    """The entry named `name`; ConfigError listing the known names when there is none."""
    try:
        return PROVIDERS[name]
    except KeyError:
        *first, last = PROVIDERS
        raise ConfigError(f"RESEARCH_SEARCH_PROVIDER={name} is not a known provider; use {', '.join(first)} "
                          f"or {last}.") from None


def require_search_access(settings: Settings) -> None:
    """Raise a ConfigError naming the variable the chosen search provider needs."""
    if settings.search_provider == "anthropic" and settings.model_provider != "anthropic":
        raise ConfigError(f"RESEARCH_SEARCH_PROVIDER=anthropic searches through Anthropic's server-side tool, which "
                          f"RESEARCH_MODEL_PROVIDER={settings.model_provider} does not have; use brave, tavily, "
                          "searxng or corpus")
    problem = provider_entry(settings.search_provider).missing(settings)
    if problem is not None:
        raise ConfigError(problem)


def make_provider(settings: Settings, *, http: httpx.Client | None = None, sleep: Sleep = time.sleep,
                  server_web_search: ServerWebSearch | None = None,
                  model_errors: tuple[type[Exception], ...] = ()) -> SearchProvider:
    """The provider RESEARCH_SEARCH_PROVIDER names; ConfigError naming the variable when its key/URL is missing.

    For `anthropic`, pass the model client's `server_web_search` (the run's, so its searches count against the
    run's budget) and the errors it raises (`model_errors`), which become SearchFailed messages.
    """
    require_search_access(settings)
    entry = provider_entry(settings.search_provider)
    return entry.factory(settings, Wiring(http=http, sleep=sleep, server_web_search=server_web_search,
                                          model_errors=model_errors))
