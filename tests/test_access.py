"""The access code: Secret Manager through the real client (REST) against a local server, constant-time comparison,
and wrong attempts limited per visitor and globally, in SQLite so a reload or a new session cannot reset them."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.store import migrated_database
from pipeline.store.database import Database
from tests.fakes.secret_manager import FakeSecretManager
from ui.access import (
    MAX_CODE_FILE_BYTES,
    MIN_CODE_CHARS,
    OFF_UNSET,
    AccessState,
    AttemptLimiter,
    FileCode,
    SecretManagerCode,
    access_state,
    code_matches,
    crc32c,
    make_client,
    reveals_code,
    visitor_id,
)

NAME = "projects/demo/secrets/access-code/versions/latest"


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def sm() -> Iterator[FakeSecretManager]:
    with FakeSecretManager({NAME: "sésame-ouvre-toi-42\n".encode()}) as fake:
        yield fake


def source(sm: FakeSecretManager, clock: Clock | None = None, name: str = NAME) -> SecretManagerCode:
    return SecretManagerCode(name, client_factory=lambda: make_client(sm.base_url), ttl=300, error_ttl=30,
                             clock=clock or Clock(), timeout=2)


def test_crc32c_matches_the_standard_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_secret_is_read_with_the_real_client_verified_and_cached(sm: FakeSecretManager) -> None:
    clock = Clock()
    code = source(sm, clock)
    state = code.state()
    assert state.enabled and state.code == "sésame-ouvre-toi-42".encode()  # whitespace of the payload removed
    assert [r.path for r in sm.requests] == [f"/v1/{NAME}:access"] and sm.requests[0].authorization is None
    clock.t += 299
    assert code.state().enabled and len(sm.requests) == 1  # cached: not fetched on every rerun
    clock.t += 2
    assert code.state().enabled and len(sm.requests) == 2
    assert "sésame" not in repr(state)


@pytest.mark.parametrize("fault,expected", [
    ("missing", "not found"), ("server_error", "HTTP 500"), ("corrupt", "CRC32C checksum"),
    ("no_checksum", "without its CRC32C"), ("bad_name", "must look like")])
def test_secret_failures_leave_live_runs_off_with_a_clear_message(sm: FakeSecretManager, fault: str,
                                                                  expected: str) -> None:
    name = {"missing": "projects/demo/secrets/other/versions/latest", "bad_name": "access-code"}.get(fault, NAME)
    sm.fail_with = 500 if fault == "server_error" else None
    sm.corrupt, sm.omit_checksum = fault == "corrupt", fault == "no_checksum"
    state = access_state(secret=source(sm, name=name), local_code="local-code-is-not-a-fallback")
    assert not state.enabled and state.code is None
    assert "Live runs are off" in state.message and expected in state.message
    assert "sésame" not in state.message and not code_matches("sésame-ouvre-toi-42", state)
    assert not code_matches("local-code-is-not-a-fallback", state)


def test_a_failed_read_is_retried_after_the_short_error_ttl(sm: FakeSecretManager) -> None:
    clock = Clock()
    code = source(sm, clock)
    sm.fail_with = 500
    assert not code.state().enabled
    sm.fail_with = None
    clock.t += 10
    assert not code.state().enabled and len(sm.requests) == 1
    clock.t += 25
    assert code.state().enabled and len(sm.requests) == 2


def test_unreachable_secret_manager_fails_closed() -> None:
    with FakeSecretManager() as gone:
        url = gone.base_url
    code = SecretManagerCode(NAME, client_factory=lambda: make_client(url), timeout=1)
    state = code.state()
    assert not state.enabled and "could not be reached" in state.message


def test_a_mounted_code_file_is_cached_and_a_rotated_code_is_read_after_the_ttl(tmp_path: Path) -> None:
    path, clock = tmp_path / "code", Clock()
    path.write_text("first-code-is-long\n", encoding="utf-8")
    source = FileCode(path, ttl=300, error_ttl=30, clock=clock)
    state = access_state(secret=source, local_code="local-code-is-not-a-fallback")
    assert state.enabled and code_matches("first-code-is-long", state)
    assert not code_matches("local-code-is-not-a-fallback", state)
    path.write_text("second-code-is-long", encoding="utf-8")  # a new secret version appears in the mount
    clock.t += 299
    assert code_matches("first-code-is-long", source.state()) and source.reads == 1
    clock.t += 2
    assert code_matches("second-code-is-long", source.state()) and source.reads == 2
    assert not code_matches("first-code-is-long", source.state())


@pytest.mark.parametrize("fault,expected", [
    ("missing", "does not exist"), ("folder", "a folder"), ("empty", "is empty"), ("binary", "not UTF-8"),
    ("huge", f"larger than {MAX_CODE_FILE_BYTES} bytes"), ("short", "shorter than 12 characters")])
def test_a_bad_code_file_leaves_live_runs_off_and_names_the_setting(tmp_path: Path, fault: str,
                                                                    expected: str) -> None:
    path = tmp_path / "mounted" / "code"
    path.parent.mkdir()
    content = {"empty": b"  \n", "binary": b"\xff\xfe-not-text-at-all", "huge": b"x" * (MAX_CODE_FILE_BYTES + 1),
               "short": b"short-code"}.get(fault)
    if fault == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    clock = Clock()
    source = FileCode(path, ttl=300, error_ttl=30, clock=clock)
    state = access_state(secret=source, local_code="local-code-is-not-a-fallback")
    assert not state.enabled and state.code is None and expected in state.message
    assert "ACCESS_CODE_FILE" in state.message and str(tmp_path) not in state.message
    assert not code_matches("local-code-is-not-a-fallback", state)
    if fault == "missing":  # the mount appears later (or the secret is granted): read again after the error ttl
        path.write_text("now-it-is-there-42", encoding="utf-8")
        assert not source.state().enabled
        clock.t += 31
        assert code_matches("now-it-is-there-42", source.state())


def test_local_code_and_nothing_configured() -> None:
    assert access_state(secret=None, local_code=None) == AccessState(False, OFF_UNSET)
    assert not access_state(secret=None, local_code="   ").enabled
    state = access_state(secret=None, local_code=" open-sesame-42 ")
    assert state.enabled and code_matches("open-sesame-42", state) and code_matches(" open-sesame-42\n", state)


@pytest.mark.parametrize("given", ["", "open", "open-sesame-42!", "ÖPEN", "\ud800", "open-sesame-42\x00", "🔑" * 50])
def test_wrong_codes_including_odd_input_are_refused_without_crashing(given: str) -> None:
    assert not code_matches(given, access_state(secret=None, local_code="open-sesame-42"))


def test_non_ascii_code_matches_exactly() -> None:
    state = access_state(secret=None, local_code="clé-ünïcødé-42")
    assert code_matches("clé-ünïcødé-42", state) and not code_matches("cle-unicode-42", state)


def test_a_code_shorter_than_the_minimum_is_a_misconfiguration(sm: FakeSecretManager) -> None:
    short = "x" * (MIN_CODE_CHARS - 1)
    state = access_state(secret=None, local_code=f" {short} ")
    assert not state.enabled and state.code is None and not code_matches(short, state)
    assert "ACCESS_CODE" in state.message and f"{MIN_CODE_CHARS} characters" in state.message
    assert short not in state.message
    assert access_state(secret=None, local_code="x" * MIN_CODE_CHARS).enabled
    sm.secrets[NAME] = b"short-code\n"
    state = access_state(secret=source(sm), local_code="a-long-enough-local-code")
    assert not state.enabled and state.code is None and not code_matches("short-code", state)
    assert "ACCESS_CODE_SECRET" in state.message and "short-code" not in state.message


def test_a_text_that_contains_the_code_in_any_case_or_spacing_reveals_it() -> None:
    state = access_state(secret=None, local_code="Open  Sésame 42")
    for text in ("my code is open sésame 42, what does Qdrant cost?", "OPEN SÉSAME\n42", "xopen sésame 42x"):
        assert reveals_code(text, state)
    for text in ("open sésame 4", "What does Qdrant cost?", ""):
        assert not reveals_code(text, state)
    assert not reveals_code("anything", AccessState(False, OFF_UNSET))


@pytest.fixture()
def databases(db_url: str) -> Iterator[Callable[[], Database]]:
    """Opens the test database (SQLite or PostgreSQL) anew on each call, as another session or process would."""
    opened: list[Database] = []

    def open_one() -> Database:
        opened.append(migrated_database(db_url))
        return opened[-1]

    yield open_one
    for db in opened:
        db.close()


def limiter(db: Database, clock: Clock, **kw: float) -> AttemptLimiter:
    return AttemptLimiter(db, clock=clock, **{"per_visitor": 5, "global_limit": 50, "window": 900.0, **kw})


def test_sixth_attempt_is_refused_even_with_the_right_code_until_the_window_passes(
        databases: Callable[[], Database]) -> None:
    clock = Clock()
    lim = limiter(databases(), clock)
    for left in (4, 3, 2, 1, 0):
        verdict = lim.attempt("v1", lambda: False)
        assert not verdict.ok and f"{left} attempt" in verdict.message
        clock.t += 10
    checked: list[bool] = []
    verdict = lim.attempt("v1", lambda: checked.append(True) or True)
    assert not verdict.ok and "Too many wrong codes from your address" in verdict.message and checked == []
    # a reload, a new session or another instance opens the same database: still refused
    other = databases()
    assert not limiter(other, clock).attempt("v1", lambda: True).ok
    assert limiter(other, clock).attempt("v2", lambda: True).ok  # another visitor is not affected
    clock.t += 900 - 40  # the first wrong attempt leaves the window; four remain
    verdict = lim.attempt("v1", lambda: True)
    assert verdict.ok and "Unlocked" in verdict.message


def test_global_limit_pauses_everyone(databases: Callable[[], Database]) -> None:
    clock = Clock()
    lim = limiter(databases(), clock, global_limit=6)
    for i in range(6):
        assert not lim.attempt(f"visitor-{i}", lambda: False).ok
    verdict = lim.attempt("fresh", lambda: True)
    assert not verdict.ok and "paused for everyone" in verdict.message
    clock.t += 901
    assert lim.attempt("fresh", lambda: True).ok


def test_right_code_is_not_counted(databases: Callable[[], Database]) -> None:
    lim = limiter(databases(), Clock(), per_visitor=2)
    for _ in range(5):
        assert lim.attempt("v", lambda: True).ok


def test_visitor_id_uses_the_proxy_appended_address() -> None:
    a = visitor_id({"X-Forwarded-For": "6.6.6.6, 203.0.113.9"}, "10.0.0.1", 1)
    assert a == visitor_id({"x-forwarded-for": "1.2.3.4, 203.0.113.9"}, "10.0.0.2", 1)  # spoofed prefix ignored
    assert a != visitor_id({"X-Forwarded-For": "203.0.113.10"}, "10.0.0.1", 1)
    assert visitor_id({}, "198.51.100.7") == visitor_id({"X-Forwarded-For": "9.9.9.9"}, "198.51.100.7", 0)
    assert visitor_id({}, None) == visitor_id({}, object()) != visitor_id({}, "198.51.100.7")  # type: ignore[arg-type]
    assert "203.0.113.9" not in a and len(a) == 32


def test_without_a_trusted_proxy_the_header_is_ignored_by_default() -> None:
    peer = visitor_id({}, "198.51.100.7")
    assert visitor_id({"X-Forwarded-For": "203.0.113.1"}, "198.51.100.7") == peer
    assert visitor_id({"X-Forwarded-For": "203.0.113.2"}, "198.51.100.7") == peer  # a new header is no new visitor


def test_an_ipv6_client_counts_by_its_64_block() -> None:
    a = visitor_id({}, "2001:db8:1:2::1")
    assert a == visitor_id({}, "2001:db8:1:2:ffff:ffff:ffff:fffe") == visitor_id({}, "2001:DB8:1:2:0:0:0:9")
    assert a == visitor_id({"X-Forwarded-For": "2001:db8:1:2::77"}, "10.0.0.1", 1)
    assert a != visitor_id({}, "2001:db8:1:3::1")
    assert visitor_id({}, "::ffff:198.51.100.7") == visitor_id({}, "198.51.100.7") != visitor_id({}, "198.51.100.8")
