"""The app's own settings from the environment (the research settings stay in pipeline.config.Settings)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import AliasChoices, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.config import Settings
from pipeline.store.database import is_postgres

if TYPE_CHECKING:
    from ui.jobs import LiveLimits
    from ui.uploads import UploadLimits

ROOT = Path(__file__).resolve().parents[1]


def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


class AppConfig(BaseSettings):
    """Where saved runs live, how the access code is found, and the server-wide limits on live runs."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    benchmark_dir: Path = Field(ROOT / "benchmark_runs", validation_alias=_env("RESEARCH_BENCHMARK_DIR"))
    access_code: SecretStr | None = Field(None, validation_alias=_env("ACCESS_CODE"))
    access_code_secret: str | None = Field(None, validation_alias=_env("ACCESS_CODE_SECRET"))
    # A Secret Manager secret mounted as a volume (the Cloud Run deploy): read again after secret_ttl, so a new
    # version of the code takes effect without a redeploy.
    access_code_file: Path | None = Field(None, validation_alias=_env("ACCESS_CODE_FILE"))
    # A local Secret Manager stand-in (tests, emulators): the client then uses anonymous credentials.
    secret_manager_url: str | None = Field(None, validation_alias=_env("RESEARCH_SECRET_MANAGER_URL"))
    secret_ttl: float = Field(300.0, validation_alias=_env("RESEARCH_ACCESS_CODE_TTL"))
    access_max_attempts: int = Field(5, ge=1, validation_alias=_env("RESEARCH_ACCESS_MAX_ATTEMPTS"))
    access_global_attempts: int = Field(50, ge=1, validation_alias=_env("RESEARCH_ACCESS_GLOBAL_ATTEMPTS"))
    access_window_seconds: float = Field(900.0, gt=0, validation_alias=_env("RESEARCH_ACCESS_WINDOW_SECONDS"))
    # Cloud Run (K_SERVICE set) appends the client's address to X-Forwarded-For; without a proxy the header is
    # whatever the client sent, so it is not trusted unless the operator says a proxy is there.
    trusted_proxies: int = Field(default_factory=lambda: 1 if os.environ.get("K_SERVICE") else 0, ge=0,
                                 validation_alias=_env("RESEARCH_TRUSTED_PROXIES"))
    live_max_concurrent: int = Field(2, ge=0, validation_alias=_env("RESEARCH_LIVE_MAX_CONCURRENT"))
    live_daily_usd: float = Field(5.0, ge=0, validation_alias=_env("RESEARCH_LIVE_DAILY_USD"))
    live_max_run_usd: float = Field(2.0, gt=0, validation_alias=_env("RESEARCH_LIVE_MAX_RUN_USD"))
    # Documents a visitor with the code may upload for one run. Streamlit refuses a file over server.maxUploadSize
    # (.streamlit/config.toml, 20 MB) before these apply, so a larger per-file limit needs that setting raised too.
    upload_max_files: int = Field(10, ge=0, validation_alias=_env("RESEARCH_UPLOAD_MAX_FILES"))
    upload_max_file_mb: float = Field(20.0, gt=0, validation_alias=_env("RESEARCH_UPLOAD_MAX_FILE_MB"))
    upload_max_total_mb: float = Field(50.0, gt=0, validation_alias=_env("RESEARCH_UPLOAD_MAX_TOTAL_MB"))

    @property
    def state_dir(self) -> Path:
        """Where this instance keeps its live runs' files: beside a SQLite run store, else `runs/` (the app's
        folder; with PostgreSQL the files are a local copy, and every instance reads runs from the database)."""
        raw = Settings().db_path
        return ROOT / "runs" if is_postgres(raw) else Path(raw).parent

    @property
    def live_dir(self) -> Path:
        return self.state_dir / "live"

    @property
    def uploads_dir(self) -> Path:
        """Where a live run's uploaded files are staged, each run's in a private folder removed when it ends."""
        return self.state_dir / "uploads"

    @property
    def upload_limits(self) -> UploadLimits:
        from ui.uploads import UploadLimits

        return UploadLimits(max_files=self.upload_max_files, max_file_bytes=int(self.upload_max_file_mb * 1e6),
                            max_total_bytes=int(self.upload_max_total_mb * 1e6))

    @property
    def live_limits(self) -> LiveLimits:
        from ui.jobs import LiveLimits  # the live-run stack (model client, fetcher) loads only when needed

        return LiveLimits(max_concurrent=self.live_max_concurrent, daily_usd=self.live_daily_usd,
                          max_run_usd=self.live_max_run_usd)


def env_problem(e: ValidationError) -> str:
    """What is wrong with the environment, by variable name; never the values (one may be a secret)."""
    wrong = "; ".join(f"{'.'.join(str(part) for part in err['loc']) or 'settings'}: {err['msg']}" for err in e.errors())
    return (f"This server's settings are invalid, so the app cannot run: {wrong}. The operator should fix these "
            "environment variables and restart the app.")
