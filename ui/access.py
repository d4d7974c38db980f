"""The access code that gates live runs: from a mounted secret file or Secret Manager (checksum verified), cached, or
from ACCESS_CODE; compared in constant time, with wrong attempts limited per visitor and in total, counted in the
database. Fails closed."""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.store.database import Database

log = logging.getLogger(__name__)

SECRET_VERSION = re.compile(r"^projects/[^/\s]+/secrets/[^/\s]+/versions/[^/\s]+$")
OFF_UNSET = ("Live runs are off on this server: no access code is configured. The operator can set "
             "ACCESS_CODE_FILE (a mounted secret), ACCESS_CODE_SECRET (a Secret Manager secret version) or "
             "ACCESS_CODE to turn them on.")
MIN_CODE_CHARS = 12  # a shorter code is easy to guess, and to type into a question by accident


def _too_short(where: str) -> str:
    return (f"Live runs are off on this server: the access code in {where} is shorter than {MIN_CODE_CHARS} "
            f"characters. The operator should set a code of at least {MIN_CODE_CHARS} characters.")


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli), the checksum Secret Manager sends with each payload (Google's google-crc32c, in C)."""
    import google_crc32c

    return int(google_crc32c.value(data))


class SecretError(Exception):
    """The secret could not be read or failed its checksum; the message is safe to show (no value, no name)."""


def make_client(endpoint: str | None = None) -> Any:
    """A Secret Manager client on the REST transport; with `endpoint` (a local server) it uses anonymous credentials."""
    from google.api_core.client_options import ClientOptions
    from google.cloud import secretmanager

    if endpoint:
        from google.auth.credentials import AnonymousCredentials

        return secretmanager.SecretManagerServiceClient(
            credentials=AnonymousCredentials(), transport="rest",
            client_options=ClientOptions(api_endpoint=endpoint))
    return secretmanager.SecretManagerServiceClient(transport="rest")


def read_secret(name: str, *, client: Any, timeout: float = 10.0) -> str:
    """The secret version's payload as text (surrounding whitespace removed); raises SecretError on any failure."""
    from google.api_core import exceptions, retry

    if not SECRET_VERSION.match(name):
        raise SecretError("ACCESS_CODE_SECRET must look like projects/PROJECT/secrets/NAME/versions/latest")
    # Transient faults are retried here, briefly: the page waits on this call.
    policy = retry.Retry(initial=0.2, maximum=2.0, multiplier=2.0, timeout=timeout,
                         predicate=retry.if_exception_type(exceptions.ServiceUnavailable,
                                                           exceptions.ResourceExhausted))
    try:
        response = client.access_secret_version(request={"name": name}, retry=policy, timeout=timeout)
    except exceptions.NotFound:
        raise SecretError("the secret version was not found") from None
    except exceptions.PermissionDenied:
        raise SecretError("permission to read the secret was denied (grant roles/secretmanager.secretAccessor)") \
            from None
    except exceptions.RetryError:
        raise SecretError(f"Secret Manager stayed unavailable for {timeout:g} seconds") from None
    except exceptions.GoogleAPICallError as e:
        raise SecretError(f"Secret Manager answered with an error (HTTP {e.code or 'unknown'})") from None
    except Exception as e:  # network faults, timeouts, missing credentials: all leave live runs off
        raise SecretError(f"Secret Manager could not be reached ({type(e).__name__})") from None
    data = bytes(response.payload.data)
    if "data_crc32c" not in response.payload:
        raise SecretError("the secret payload came without its CRC32C checksum")
    if crc32c(data) != int(response.payload.data_crc32c):
        raise SecretError("the secret payload failed its CRC32C checksum")
    return _code_text(data, "the secret payload")


def _code_text(data: bytes, what: str) -> str:
    """`data` as text without surrounding whitespace; SecretError naming `what` when it is not UTF-8 or is empty."""
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SecretError(f"{what} is not UTF-8 text") from None
    if not text:
        raise SecretError(f"{what} is empty")
    return text


@dataclass(frozen=True)
class AccessState:
    """Whether live runs can be unlocked, the message to show, and the code (never printed)."""

    enabled: bool
    message: str
    code: bytes | None = field(default=None, repr=False)


class CachedCode:
    """The access code from one source, read again when `ttl` seconds have passed (after a failure, `error_ttl`)."""

    where = "the configured source"  # for messages: where the operator put the code
    fix = "the access code setting"  # what the operator should check when a read fails

    def __init__(self, *, ttl: float = 300.0, error_ttl: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self._ttl, self._error_ttl, self._clock = ttl, error_ttl, clock
        self._lock = threading.Lock()
        self._state: AccessState | None = None
        self._expires = 0.0
        self.reads = 0

    def _read(self) -> str:
        """The code as text; raises SecretError (with a message safe to show) on any failure."""
        raise NotImplementedError

    def state(self) -> AccessState:
        """The cached state, read again from the source when it has expired."""
        with self._lock:
            now = self._clock()
            if self._state is not None and now < self._expires:
                return self._state
            self.reads += 1
            try:
                code = self._read()
                if len(code) < MIN_CODE_CHARS:
                    log.warning("access code: the value in %s is too short; live runs are off", self.where)
                    self._state = AccessState(False, _too_short(self.where))
                else:
                    self._state = AccessState(True, "Enter the access code to run live research.", _bytes(code))
                self._expires = now + self._ttl
            except SecretError as e:
                log.warning("access code: reading %s failed: %s", self.where, e)
                self._state = AccessState(False, f"Live runs are off: the access code could not be read from "
                                                 f"{self.where} ({e}). The operator should check {self.fix}.")
                self._expires = now + self._error_ttl
            return self._state


class SecretManagerCode(CachedCode):
    """The access code from one Secret Manager version (ACCESS_CODE_SECRET), checksum verified."""

    where = "Secret Manager (ACCESS_CODE_SECRET)"
    fix = "ACCESS_CODE_SECRET and the service account's access"

    def __init__(self, name: str, *, client_factory: Callable[[], Any] = make_client, ttl: float = 300.0,
                 error_ttl: float = 30.0, clock: Callable[[], float] = time.monotonic, timeout: float = 10.0):
        super().__init__(ttl=ttl, error_ttl=error_ttl, clock=clock)
        self.name, self._client_factory, self._timeout = name, client_factory, timeout
        self._client: Any = None

    def _read(self) -> str:
        if self._client is None:
            self._client = self._client_factory()
        return read_secret(self.name, client=self._client, timeout=self._timeout)


MAX_CODE_FILE_BYTES = 4096


class FileCode(CachedCode):
    """The access code from a file (ACCESS_CODE_FILE): on Cloud Run, a Secret Manager secret mounted as a volume.
    A mount of version `latest` shows the newest version when the file is read, so rotating the code needs no
    redeploy: the app reads the file again once its cache has expired."""

    where = "the mounted file (ACCESS_CODE_FILE)"
    fix = "ACCESS_CODE_FILE and the secret's volume mount"

    def __init__(self, path: Path, *, ttl: float = 300.0, error_ttl: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(ttl=ttl, error_ttl=error_ttl, clock=clock)
        self.path = Path(path)

    def _read(self) -> str:
        try:
            with self.path.open("rb") as f:
                data = f.read(MAX_CODE_FILE_BYTES + 1)
        except FileNotFoundError:
            raise SecretError("the file does not exist") from None
        except IsADirectoryError:
            raise SecretError("the path is a folder, not a file") from None
        except OSError as e:
            raise SecretError(f"the file could not be read ({type(e).__name__})") from None
        if len(data) > MAX_CODE_FILE_BYTES:
            raise SecretError(f"the file is larger than {MAX_CODE_FILE_BYTES} bytes")
        return _code_text(data, "the file")


def access_state(*, secret: CachedCode | None, local_code: str | None) -> AccessState:
    """The configured source (a mounted file or Secret Manager; no fallback if it fails), else ACCESS_CODE, else live
    runs are off; a code shorter than MIN_CODE_CHARS is a misconfiguration and leaves them off too."""
    if secret is not None:
        return secret.state()
    if local_code and local_code.strip():
        if len(local_code.strip()) < MIN_CODE_CHARS:
            return AccessState(False, _too_short("ACCESS_CODE"))
        return AccessState(True, "Enter the access code to run live research.", _bytes(local_code.strip()))
    return AccessState(False, OFF_UNSET)


def _bytes(text: str) -> bytes:
    # surrogatepass: any str a browser can send encodes, so odd input is refused, never a crash
    return text.encode("utf-8", "surrogatepass")


def code_matches(given: str, state: AccessState) -> bool:
    """Constant-time comparison of `given` with the configured code; always False when live runs are off."""
    if not state.enabled or not state.code:
        return False
    return hmac.compare_digest(_bytes(given.strip()), state.code)


def reveals_code(text: str, state: AccessState) -> bool:
    """Whether `text` contains the access code (any case or spacing): such a question must not be run, since
    questions are stored and shown with their report."""
    if not state.code:
        return False
    code = " ".join(state.code.decode("utf-8", "surrogatepass").split()).casefold()
    return bool(code) and code in " ".join(text.split()).casefold()


def visitor_id(headers: Mapping[str, str] | None, ip: str | None, trusted_proxies: int = 0) -> str:
    """A stable, hashed id of the visitor's address: the client entry of X-Forwarded-For that the `trusted_proxies`
    in front of the app appended (Cloud Run appends one), else the socket's peer address. An IPv6 address counts
    by its /64, the block one client holds."""
    forwarded = ""
    for k, v in (headers or {}).items():
        if k.lower() == "x-forwarded-for":
            forwarded = v
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    peer = ip if isinstance(ip, str) and ip else "unknown"
    addr = hops[-trusted_proxies] if trusted_proxies > 0 and len(hops) >= trusted_proxies else peer
    return hashlib.sha256(_client_block(addr).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _client_block(addr: str) -> str:
    """An IPv4 address as it is, an IPv6 one as its /64 network; anything unparsable unchanged."""
    try:
        ip = ipaddress.ip_address(addr.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return addr
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str


class AttemptLimiter:
    """Counts wrong codes in the database (shared by all sessions, reloads, processes and app instances): at most
    `per_visitor` per visitor and `global_limit` in all per `window` seconds; once reached, every attempt is refused
    without being compared."""

    def __init__(self, db: Database, *, per_visitor: int = 5, global_limit: int = 50, window: float = 900.0,
                 clock: Callable[[], float] = time.time):
        self.db = db
        self.per_visitor, self.global_limit, self.window, self._clock = per_visitor, global_limit, window, clock

    def attempt(self, visitor: str, check: Callable[[], bool]) -> Verdict:
        """Runs `check` unless a limit is reached; a False result is counted against `visitor` and everyone."""
        now = self._clock()
        # Count and record in one transaction that serialises every attempt: parallel tries cannot slip by.
        with self.db.transaction("verbatim-wrong-codes") as db:
            db.execute("DELETE FROM wrong_codes WHERE at <= ?", (now - self.window,))
            mine = db.execute("SELECT COUNT(*), MIN(at) FROM wrong_codes WHERE visitor = ?", (visitor,)).rows[0]
            total = db.execute("SELECT COUNT(*), MIN(at) FROM wrong_codes").rows[0]
            if mine[0] >= self.per_visitor:
                return Verdict(False, f"Too many wrong codes from your address ({self.per_visitor} in "
                                      f"{_minutes(self.window)}). Try again in {_wait(mine[1], self.window, now)}.")
            if total[0] >= self.global_limit:
                wait = _wait(total[1], self.window, now)
                return Verdict(False, "Too many wrong codes have been entered on this server recently, so code "
                                      f"entry is paused for everyone. Try again in {wait}.")
            if check():
                return Verdict(True, "Unlocked: you can run live research in this browser session.")
            db.execute("INSERT INTO wrong_codes (visitor, at) VALUES (?, ?)", (visitor, now))
            left = self.per_visitor - mine[0] - 1
            return Verdict(False, f"That code is not right. {left} attempt{'s' if left != 1 else ''} left in the "
                                  f"next {_minutes(self.window)}.")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} seconds"


def _wait(oldest: float | None, window: float, now: float) -> str:
    left = max(1, int((oldest or now) + window - now + 0.999))
    return f"{(left + 59) // 60} minute{'s' if left > 60 else ''}" if left >= 60 else f"{left} seconds"
