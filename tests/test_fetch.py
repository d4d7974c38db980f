"""Guarded fetching end to end against real servers on 127.0.0.1 (tests/fakes/web_server.py).

Names resolve through an injected resolver and every connection goes through a recording network backend that
only ever reaches loopback, so a hostile URL could not produce real traffic even if the guard had a bug; a canary
server on loopback proves that refused URLs reach nothing.
"""
from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpcore
import pytest

from pipeline.config import Settings
from pipeline.core.budget import Budget, Phase
from pipeline.core.events import ListSink
from pipeline.core.schema import BudgetLimits, FetchResult
from pipeline.web import charset
from pipeline.web.charset import decode_text
from pipeline.web.fetch import MAX_REDIRECTS, Fetcher, SavedPage
from tests.fakes.web_server import Route, WebServer
from tests.regex_audit import token_texts

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_V4 = "93.184.216.34"
ARTICLE = ("<html><head><title>{title}</title></head>"
           "<body><article><h1>{title}</h1><p>{text}</p></article></body></html>")
SENTENCE = "The committee published its annual report on river water quality in March. "


def page(title: str = "River report", text: str = SENTENCE * 8) -> str:
    return ARTICLE.format(title=title, text=text)


class LoopbackOnly(httpcore.SyncBackend):
    """Records every connection; makes it only to loopback, refuses anything else before any packet is sent."""

    def __init__(self) -> None:
        self.connects: list[tuple[str, int]] = []

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: object = None) -> httpcore.NetworkStream:
        self.connects.append((host, port))
        if not ipaddress.ip_address(host).is_loopback:
            raise httpcore.ConnectError(f"test backend: {host} is not loopback, not connecting")
        return super().connect_tcp(host, port, timeout, local_address, socket_options)  # type: ignore[arg-type]


class FakeDNS:
    """Resolver from a table (a callable value answers per call); records lookups; unknown names fail."""

    def __init__(self, table: dict[str, object]) -> None:
        self.table = table
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        answer = self.table[host]
        return answer() if callable(answer) else answer  # type: ignore[return-value]


def no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"unexpected lookup of {host}")


@pytest.fixture()
def server() -> Iterator[WebServer]:
    with WebServer() as s:
        yield s


def fetcher_for(server: WebServer, **kw: object) -> tuple[Fetcher, LoopbackOnly]:
    settings = kw.pop("settings", None) or Settings(fetch_allow_raw=server.host_port)
    backend = LoopbackOnly()
    return Fetcher(settings, resolve=kw.pop("resolve", no_dns), network_backend=backend, **kw), backend  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------
# Hostile URLs: at least 50, all blocked, and a canary on loopback receives nothing.

HOSTILE = [
    "http://127.0.0.1:{C}/", "http://127.0.0.2:{C}/", "http://2130706433:{C}/", "http://0x7f.1:{C}/",
    "http://0177.0.0.1:{C}/", "http://127.1:{C}/", "http://0x7f000001:{C}/", "http://017700000001:{C}/",
    "http://0x7f.0x0.0x0.0x1:{C}/", "http://127.000.000.001:{C}/", "http://１２７.０.０.１:{C}/",
    "http://%31%32%37.0.0.1:{C}/", "http://[::1]:{C}/", "http://[0:0:0:0:0:0:0:1]:{C}/",
    "http://[::ffff:127.0.0.1]:{C}/", "http://[::ffff:7f00:1]:{C}/", "http://[::127.0.0.1]:{C}/",
    "http://[2002:7f00:1::]:{C}/", "http://[64:ff9b::127.0.0.1]:{C}/", "http://[64:ff9b:1::7f00:1]:{C}/",
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{C}/", "http://[2001:0:7f00:1:8000:63bf:3fff:fdd2]:{C}/",
    "http://0.0.0.0:{C}/", "http://0:{C}/", "http://[::]:{C}/", "http://localhost:{C}/", "http://LOCALHOST.:{C}/",
    "http://api.localhost:{C}/", "http://evil.test:{C}/", "http://127.0.0.1.nip.io:{C}/", "http://intranet:{C}/",
    "http://169.254.169.254/latest/meta-data/", "http://169.254.169.254:{C}/", "http://[fe80::1]:{C}/",
    "http://[fe80::1%25lo]:{C}/", "http://[::ffff:169.254.169.254]/", "http://metadata.google.internal/",
    "http://10.0.0.1:{C}/", "http://192.168.1.1:{C}/", "http://172.16.0.1:{C}/", "http://100.64.0.1:{C}/",
    "http://224.0.0.1:{C}/", "http://[ff02::1]:{C}/", "http://240.0.0.1:{C}/", "http://[fc00::1]:{C}/",
    "http://mixed.test:{C}/", "http://mixed-reversed.test:{C}/", "http://mixed6.test:{C}/",
    "http://{A}@127.0.0.1:{C}/", "http://user:pass@{A}/", "http://@{A}/", "http://:@{A}/", "http://127.0.0.1:{C}#@{A}/",
    "http://127.0.0.1:{C}\\@{A}/",
    "file:///etc/passwd", "gopher://127.0.0.1:{C}/_GET", "dict://127.0.0.1:{C}/info", "ftp://127.0.0.1:{C}/",
    "data:text/html,<h1>x</h1>", "javascript:alert(1)", "http://" + PUBLIC_V4 + ":22/",
    # an allowed page that redirects somewhere refused
    "http://{A}/r301", "http://{A}/r302", "http://{A}/r307", "http://{A}/r308", "http://{A}/r303-numeric",
    "http://{A}/to-file", "http://{A}/to-metadata", "http://{A}/to-localhost", "http://{A}/chain0",
]
REDIRECTING = {"/r301", "/r302", "/r307", "/r308", "/r303-numeric", "/to-file", "/to-metadata", "/to-localhost",
               "/chain0"}


@pytest.fixture(scope="module")
def hostile_world() -> Iterator[tuple[WebServer, WebServer]]:
    """A canary (must count zero) and an allowed server whose pages redirect to it and to other refused places."""
    with WebServer({"/": Route.html(page("CANARY"))}) as canary, WebServer() as allowed:
        c = canary.url("/")
        for code in (301, 302, 307, 308):
            allowed.route(f"/r{code}", Route.redirect(c, code))
        allowed.route("/r303-numeric", Route.redirect(f"http://2130706433:{canary.port}/", 303))
        allowed.route("/to-file", Route.redirect("file:///etc/passwd"))
        allowed.route("/to-metadata", Route.redirect("http://169.254.169.254/latest/meta-data/"))
        allowed.route("/to-localhost", Route.redirect(f"http://localhost:{canary.port}/"))
        for i in range(MAX_REDIRECTS + 1):
            allowed.route(f"/chain{i}", Route.redirect(f"/chain{i + 1}", 301))
        allowed.route(f"/chain{MAX_REDIRECTS + 1}", Route.redirect(c))
        yield canary, allowed


def hostile_dns() -> FakeDNS:
    return FakeDNS({
        "localhost": ["127.0.0.1", "::1"], "api.localhost": ["127.0.0.1"], "evil.test": ["127.0.0.1"],
        "127.0.0.1.nip.io": ["127.0.0.1"], "intranet": ["127.0.0.1"],
        "metadata.google.internal": ["169.254.169.254"], "mixed.test": [PUBLIC_V4, "127.0.0.1"],
        "mixed-reversed.test": ["127.0.0.1", PUBLIC_V4], "mixed6.test": ["2001:4860:4860::8888", "::1"],
    })


def test_there_are_at_least_fifty_distinct_hostile_urls() -> None:
    assert len(set(HOSTILE)) >= 50


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_url_is_blocked_and_reaches_nothing(template: str, hostile_world: tuple[WebServer, WebServer]) -> None:
    canary, allowed = hostile_world
    url = template.format(C=canary.port, A=allowed.host_port)
    # The canary's port is an allowed port, so only the address policy stands between these URLs and the canary.
    settings = Settings(fetch_allow_raw=allowed.host_port, fetch_ports_raw=f"80,443,{canary.port}")
    backend = LoopbackOnly()
    result = Fetcher(settings, resolve=hostile_dns(), network_backend=backend).fetch(url)

    assert (result.ok, result.error_kind) == (False, "blocked"), result
    assert result.error and result.error.startswith("FETCH_FAILED: blocked - ") and "\n" not in result.error
    assert canary.count() == 0
    path = template.split("{A}", 1)[-1] if "{A}/" in template else None
    expected = {("127.0.0.1", allowed.port)} if path in REDIRECTING else set()
    assert set(backend.connects) == expected


def test_six_redirects_are_refused_at_the_sixth(hostile_world: tuple[WebServer, WebServer]) -> None:
    canary, allowed = hostile_world
    fetcher, backend = fetcher_for(allowed)
    before = {i: allowed.count(f"/chain{i}") for i in range(MAX_REDIRECTS + 2)}
    result = fetcher.fetch(allowed.url("/chain0"))
    assert result.error_kind == "blocked" and "redirects more than 5 times" in (result.error or "")
    followed = {i: allowed.count(f"/chain{i}") - before[i] for i in before}
    assert followed == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 0}
    assert canary.count() == 0


def test_five_redirects_are_followed(server: WebServer) -> None:
    for i in range(5):
        server.route(f"/hop{i}", Route.redirect(f"/hop{i + 1}" if i < 4 else server.url("/end"), 307))
    server.route("/end", Route.html(page("End of the chain")))
    result = fetcher_for(server)[0].fetch(server.url("/hop0"))
    assert result.ok and result.title == "End of the chain"
    assert result.final_url == server.url("/end") and result.url == server.url("/hop0")


def test_rebinding_resolver_cannot_redirect_the_connection(hostile_world: tuple[WebServer, WebServer]) -> None:
    """First answer public, later answers loopback: we look up once and connect to what we vetted."""
    canary, _ = hostile_world
    answers = iter([[PUBLIC_V4]])
    dns = FakeDNS({"rebind.test": lambda: next(answers, ["127.0.0.1"])})
    backend = LoopbackOnly()
    settings = Settings(fetch_ports_raw=f"80,443,{canary.port}")
    result = Fetcher(settings, resolve=dns, network_backend=backend).fetch(f"http://rebind.test:{canary.port}/")
    assert dns.calls == ["rebind.test"]
    assert backend.connects == [(PUBLIC_V4, canary.port)]
    assert result.error_kind == "network" and canary.count() == 0


def test_connects_to_the_vetted_ip_with_the_original_host_header(server: WebServer) -> None:
    server.route("/p", Route.html(page("Named host")))
    server.route("/go", Route.redirect(f"http://other.test:{server.port}/p"))
    dns = FakeDNS({"example.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    settings = Settings(fetch_allow_raw=f"example.test:{server.port},other.test:{server.port}")
    fetcher, backend = fetcher_for(server, settings=settings, resolve=dns)

    result = fetcher.fetch(f"http://example.test:{server.port}/go")
    assert result.ok and result.title == "Named host"
    assert result.final_url == f"http://other.test:{server.port}/p"
    assert backend.connects == [("127.0.0.1", server.port)] * 2
    assert [r.headers["Host"] for r in server.requests] == [f"example.test:{server.port}", f"other.test:{server.port}"]
    assert dns.calls == ["example.test", "other.test"]


def test_environment_proxies_are_ignored(server: WebServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.route("/", Route.html(page()))
    with WebServer() as proxy:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url("/"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        result = fetcher_for(server)[0].fetch(server.url("/"))
        assert result.ok
        assert proxy.count() == 0 and server.count("/") == 1


# ---------------------------------------------------------------------------------------------------------------
# TLS: connect to the IP, but SNI and the certificate check use the real host name.

def _tls_material(tmp: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (tmp / "ca.pem").write_bytes(ca.public_bytes(pem))
    (tmp / "leaf.pem").write_bytes(leaf.public_bytes(pem))
    (tmp / "leaf.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp / "leaf.pem", tmp / "leaf.key")
    return server_ctx, ssl.create_default_context(cafile=str(tmp / "ca.pem"))


def test_https_uses_sni_and_verifies_the_certificate_for_the_host_name(tmp_path: Path) -> None:
    server_ctx, client_ctx = _tls_material(tmp_path, "secure.test")
    with WebServer({"/": Route.html(page("Secure page"))}, tls=server_ctx) as server:
        dns = FakeDNS({"secure.test": ["127.0.0.1"], "impostor.test": ["127.0.0.1"]})
        allow = f"secure.test:{server.port},impostor.test:{server.port}"
        fetcher, backend = fetcher_for(server, settings=Settings(fetch_allow_raw=allow), resolve=dns,
                                       ssl_context=client_ctx)
        ok = fetcher.fetch(f"https://secure.test:{server.port}/")
        assert ok.ok and ok.title == "Secure page", ok
        assert server.sni_names == ["secure.test"]
        assert server.requests[0].headers["Host"] == f"secure.test:{server.port}"

        # Same IP, same certificate, another name: verification must fail (it checks the name, not the IP).
        wrong = fetcher.fetch(f"https://impostor.test:{server.port}/")
        assert wrong.error_kind == "network" and server.count() == 1
        assert backend.connects == [("127.0.0.1", server.port)] * 2


# ---------------------------------------------------------------------------------------------------------------
# Time and size limits.

@pytest.mark.parametrize("drip_head", [False, True], ids=["body", "headers"])
def test_a_slow_drip_hits_the_overall_deadline(server: WebServer, drip_head: bool) -> None:
    server.route("/slow", Route(headers={"Content-Type": "text/html"}, body=page().encode(), drip=0.05,
                                drip_head=drip_head))
    fetcher, _ = fetcher_for(server, settings=Settings(fetch_allow_raw=server.host_port, fetch_deadline=1.5))
    started = time.monotonic()
    result = fetcher.fetch(server.url("/slow"))
    elapsed = time.monotonic() - started
    assert result.error_kind == "timeout", result
    assert 1.4 <= elapsed < 2.5  # one byte every 0.05 s never trips a per-read timeout; only the deadline stops it


def test_a_gzip_bomb_stops_at_the_cap(server: WebServer) -> None:
    server.route("/bomb", Route.gzip_bomb(4 << 30))  # 4 GB of zeros; about 4 MB on the wire
    fetcher, _ = fetcher_for(server, settings=Settings(fetch_allow_raw=server.host_port, fetch_max_bytes=1_000_000))
    started = time.monotonic()
    tracemalloc.start()
    try:
        result = fetcher.fetch(server.url("/bomb"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.error_kind == "too_large" and "1,000,000-byte limit" in (result.error or "")
    assert time.monotonic() - started < 3
    assert peak < 8_000_000  # inflating is bounded chunk by chunk, not only checked afterwards


def test_a_declared_20_mb_page_is_refused_without_reading(server: WebServer) -> None:
    server.route("/big", Route.content(b"<html>" + b"a" * 20_000_000, "text/html"))
    started = time.monotonic()
    result = fetcher_for(server)[0].fetch(server.url("/big"))
    assert (result.error_kind, result.bytes) == ("too_large", 0)
    assert "20,000,006 bytes" in (result.error or "") and time.monotonic() - started < 2


def test_an_undeclared_20_mb_text_page_is_cut_at_the_cap(server: WebServer) -> None:
    line = b"Measured flow at the gauge rose again today.\n"
    server.route("/big.txt", Route.streamed(lambda: (line * 20_000 for _ in range(23)), "text/plain"))
    settings = Settings(fetch_allow_raw=server.host_port, fetch_max_bytes=1_000_000)
    result = fetcher_for(server, settings=settings)[0].fetch(server.url("/big.txt"))
    assert result.ok and result.truncated and result.bytes == 1_000_000
    assert (result.text or "").startswith("Measured flow at the gauge rose again today.")


def test_a_pdf_over_the_cap_is_refused(server: WebServer) -> None:
    server.route("/big.pdf", Route.streamed(lambda: (b"%PDF-1.4\n" + b"0" * 100_000 for _ in range(20)),
                                            "application/pdf"))
    settings = Settings(fetch_allow_raw=server.host_port, fetch_max_bytes=1_000_000)
    assert fetcher_for(server, settings=settings)[0].fetch(server.url("/big.pdf")).error_kind == "too_large"


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_compressed_pages_are_decoded(server: WebServer, encoding: str) -> None:
    html = page("Compressed").encode()
    body = {"gzip": gzip.compress(html), "deflate": zlib.compress(html),
            "raw-deflate": zlib.compress(html)[2:-4]}[encoding]
    server.route("/c", Route.content(body, "text/html; charset=utf-8",
                                     headers={"Content-Encoding": encoding.removeprefix("raw-")}))
    result = fetcher_for(server)[0].fetch(server.url("/c"))
    assert result.ok and result.title == "Compressed" and result.bytes == len(html)
    assert server.requests[0].headers["Accept-Encoding"] == "gzip, deflate"


def test_an_unknown_content_encoding_is_unsupported(server: WebServer) -> None:
    server.route("/br", Route.content(b"\x1b\x00", "text/html", headers={"Content-Encoding": "br"}))
    assert fetcher_for(server)[0].fetch(server.url("/br")).error_kind == "unsupported_type"


# ---------------------------------------------------------------------------------------------------------------
# Statuses, types, charsets, PDFs.

@pytest.mark.parametrize(("status", "message"), [
    (404, "FETCH_FAILED: 404 - the page does not exist; choose another source"),
    (403, "FETCH_FAILED: 403 - the site refused access; choose another source"),
    (500, "FETCH_FAILED: 500 - the site had a server error; choose another source"),
])
def test_error_statuses_are_http_status(server: WebServer, status: int, message: str) -> None:
    server.route("/x", Route.html(page("Error page"), status=status))
    result = fetcher_for(server)[0].fetch(server.url("/x"))
    assert (result.ok, result.error_kind, result.status, result.error) == (False, "http_status", status, message)


def test_an_image_is_unsupported(server: WebServer) -> None:
    server.route("/cat.png", Route.content(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image/png"))
    result = fetcher_for(server)[0].fetch(server.url("/cat.png"))
    assert (result.error_kind, result.content_type, result.status) == ("unsupported_type", "image/png", 200)


def test_unlabelled_bodies_are_sniffed(server: WebServer) -> None:
    server.route("/doc", Route(headers={}, body=page("Unlabelled").encode()))
    server.route("/bin", Route.content(b"\0\1\2\3" * 100, "application/octet-stream"))
    fetcher = fetcher_for(server)[0]
    assert fetcher.fetch(server.url("/doc")).title == "Unlabelled"
    assert fetcher.fetch(server.url("/bin")).error_kind == "unsupported_type"


WINDOWS_1252 = "Café owners say “prices” rose – by 20 € – since the œuvre opened."
JAPANESE = "東京都は新しい水質報告書を三月に公表した。河川の水質は昨年より改善したと報告されている。"


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("text/html; charset=windows-1252", page("Prix", WINDOWS_1252).encode("cp1252"), WINDOWS_1252),
        ("text/html; charset=ISO-8859-1", page("Prix", WINDOWS_1252).encode("cp1252"), WINDOWS_1252),
        ("text/html", page("Prix", WINDOWS_1252).replace("<head>", '<head><meta charset="windows-1252">')
         .encode("cp1252"), WINDOWS_1252),
        ("text/html; charset=Shift_JIS", page("水質", JAPANESE * 3).encode("shift_jis"), JAPANESE),
        ("text/html", page("水質", JAPANESE * 3).replace(
            "<head>", '<head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">')
         .encode("shift_jis"), JAPANESE),
        ("text/plain; charset=shift_jis", (JAPANESE * 3).encode("shift_jis"), JAPANESE),
        ("text/html", page("水質", JAPANESE * 3).encode("utf-8"), JAPANESE),
    ],
    ids=["1252-header", "latin1-label-means-1252", "1252-meta", "sjis-header", "sjis-meta", "sjis-text", "utf8-bare"],
)
def test_charsets_decode(server: WebServer, content_type: str, body: bytes, expected: str) -> None:
    server.route("/p", Route.content(body, content_type))
    result = fetcher_for(server)[0].fetch(server.url("/p"))
    assert result.ok, result
    assert expected in (result.text or "")


def test_undeclared_charset_is_detected() -> None:
    assert JAPANESE in decode_text((JAPANESE * 4).encode("shift_jis"), None, html=False)
    assert decode_text("naïve café".encode(), None, html=True) == "naïve café"
    assert decode_text(b"\xef\xbb\xbfcaf\xc3\xa9", "windows-1252", html=True) == "café"  # a BOM wins over the header


def test_declared_charsets_win_over_utf8_validity() -> None:
    """"Â£5" in Windows-1252 is also valid UTF-8 ("£5"): only the declaration can tell, so it is read first."""
    body = '<html><head><meta charset="windows-1252"></head><p>Â£5</p></html>'.encode("cp1252")
    assert "<p>Â£5</p>" in decode_text(body, None, html=True)
    assert decode_text("Â£5".encode("cp1252"), "windows-1252", html=False) == "Â£5"
    assert decode_text("Â£5".encode("cp1252"), None, html=False) == "£5"


def test_a_page_labelled_utf8_that_is_not_is_detected_unless_it_holds_utf8_characters() -> None:
    cp1252 = "The plan costs 25 € a month, or 21 £, in the café.".encode("cp1252")
    assert "25 € a month, or 21 £" in decode_text(cp1252, "utf-8", html=False)  # no U+FFFD where the signs were
    mixed = "Zürich and Genève ".encode() * 20 + b"one stray \xff byte"
    text = decode_text(mixed, "utf-8", html=False)
    assert text.startswith("Zürich and Genève") and text.count("\ufffd") == 1  # UTF-8 it is: only the stray goes


@pytest.mark.parametrize("content_type,body", [
    ("text/html; charset=utf-16le", page("Prices", "Prices rose by 4 percent this year.").encode("utf-16-le")),
    ("text/plain", b"Prices rose by 4 percent.\x0bA Word line break, then a DOS end of file.\x1a"),
])
def test_utf16_text_or_a_stray_control_byte_is_not_refused_as_binary(server: WebServer, content_type: str,
                                                                       body: bytes) -> None:
    server.route("/odd", Route.content(body, content_type))
    result = fetcher_for(server)[0].fetch(server.url("/odd"))
    assert result.ok and "Prices rose by 4 percent" in (result.text or ""), result


def test_charset_labels_mean_what_browsers_read() -> None:
    assert decode_text("①番".encode("cp932"), "Shift_JIS", html=False) == "①番"  # NEC extension: cp932, not shift_jis
    assert decode_text(JAPANESE.encode("cp932"), "x-sjis", html=False) == JAPANESE
    assert decode_text("‘€’".encode("cp1252"), "us-ascii", html=False) == "‘€’"


def test_a_utf8_body_cut_inside_a_character_still_decodes_as_utf8() -> None:
    cut = "Zürich – Genè".encode()[:-1]
    assert decode_text(cut, None, html=False, truncated=True) == "Zürich – Gen"


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF that shows `text`, with a correct cross-reference table."""
    content = b"BT /F1 24 Tf 72 720 Td (" + text.encode("latin-1") + b") Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


def test_a_pdf_is_extracted_and_a_malformed_one_fails_cleanly(server: WebServer) -> None:
    server.route("/ok.pdf", Route.content(tiny_pdf("Water quality improved in 2024"), "application/pdf"))
    server.route("/bad.pdf", Route.content(b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 9 0 R", "application/pdf"))
    fetcher = fetcher_for(server)[0]
    good = fetcher.fetch(server.url("/ok.pdf"))
    assert good.ok and "Water quality improved in 2024" in (good.text or "")
    assert good.content_type == "application/pdf"
    bad = fetcher.fetch(server.url("/bad.pdf"))
    assert (bad.ok, bad.error_kind) == (False, "unsupported_type")
    assert (bad.error or "").startswith("FETCH_FAILED: unsupported_type - the PDF could not be read")


def test_a_pdf_longer_than_the_page_limit_is_fetched_and_reported_truncated(server: WebServer) -> None:
    from tests.test_extract import make_pdf

    long_pdf = make_pdf([[f"Page {i} reports a figure of {i} units."] for i in range(1, 203)])
    server.route("/long.pdf", Route.content(long_pdf, "application/pdf"))
    result = fetcher_for(server)[0].fetch(server.url("/long.pdf"))
    assert result.ok and result.truncated  # read up to the page limit (200), and said so
    assert "Page 200 reports" in (result.text or "") and "Page 201 reports" not in (result.text or "")


def test_a_page_without_text_is_reported_not_returned_empty(server: WebServer) -> None:
    server.route("/js", Route.html("<html><body><script>render()</script></body></html>"))
    result = fetcher_for(server)[0].fetch(server.url("/js"))
    assert result.error_kind == "unsupported_type" and "no readable text" in (result.error or "")


def test_connection_refused_is_a_network_failure() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = Fetcher(Settings(fetch_allow_raw=f"127.0.0.1:{port}")).fetch(f"http://127.0.0.1:{port}/")
    assert result.error_kind == "network" and result.error == (
        "FETCH_FAILED: network - the connection failed (ConnectError); choose another source")


# ---------------------------------------------------------------------------------------------------------------
# Cache, repeat failures, budget, events, threads, corpus.

def test_successes_are_cached_by_normalised_url_and_cost_no_budget(server: WebServer) -> None:
    server.route("/a", Route.html(page("Cached")))
    server.route("/old", Route.redirect("/a", 301))
    budget = Budget(BudgetLimits(fetches=10, reserve=0.0), price_of=lambda m: None)  # type: ignore[arg-type,return-value]
    events = ListSink()
    fetcher = fetcher_for(server, budget=budget, events=events)[0]
    first = fetcher.fetch(server.url("/a"))
    again = fetcher.fetch(server.url("/a/?utm_source=x#top"))
    assert first.ok and again.ok and again.text == first.text
    assert again.url == server.url("/a/?utm_source=x#top")
    fetcher.fetch(server.url("/old"))  # redirects to /a: fetched once more, then /a is already known
    assert server.count("/a") == 2 and budget.used().fetches == 2
    assert [e.payload["cached"] for e in events.of("fetch")] == [False, True, False]


def test_the_final_url_of_a_redirect_is_cached_too(server: WebServer) -> None:
    server.route("/new", Route.html(page("Moved here")))
    server.route("/old", Route.redirect("/new", 308))
    fetcher = fetcher_for(server)[0]
    assert fetcher.fetch(server.url("/old")).ok
    assert fetcher.fetch(server.url("/new")).title == "Moved here"
    assert server.count("/new") == 1


def test_a_failed_url_is_not_fetched_again(server: WebServer) -> None:
    server.route("/gone", Route(status=404))
    fetcher = fetcher_for(server)[0]
    assert fetcher.fetch(server.url("/gone")).error_kind == "http_status"
    second = fetcher.fetch(server.url("/gone"))
    assert second.error_kind == "repeat_failure" and "(http_status)" in (second.error or "")
    assert server.count("/gone") == 1
    assert fetcher.fetch("http://127.0.0.1:1/").error_kind == "blocked"
    assert fetcher.fetch("http://127.0.0.1:1/").error_kind == "repeat_failure"


def test_budget_is_spent_before_the_network_and_refusal_is_not_remembered(server: WebServer) -> None:
    server.route("/one", Route.html(page("One")))
    server.route("/two", Route.html(page("Two")))
    budget = Budget(BudgetLimits(fetches=2, reserve=0.5), price_of=lambda m: None)  # type: ignore[arg-type,return-value]
    fetcher = fetcher_for(server, budget=budget)[0]
    assert fetcher.fetch("http://10.0.0.1/").error_kind == "blocked"  # refused URLs cost nothing
    assert fetcher.fetch(server.url("/one")).ok
    refused = fetcher.fetch(server.url("/two"))
    assert refused.error_kind == "budget" and (refused.error or "").startswith("BUDGET_EXHAUSTED")
    assert server.count("/two") == 0
    assert fetcher.fetch(server.url("/two"), phase=Phase.SYNTHESIS).ok  # not a repeat_failure
    assert budget.used().fetches == 2


def test_each_fetch_emits_an_event_with_the_text(server: WebServer) -> None:
    server.route("/e", Route.html(page("Evented")))
    events = ListSink()
    fetcher = fetcher_for(server, events=events)[0]
    fetcher.fetch(server.url("/e"))
    fetcher.fetch(server.url("/missing"))
    ok, failed = events.of("fetch")
    assert ok.payload["url"] == server.url("/e") and ok.payload["status"] == 200
    assert SENTENCE.strip() in ok.payload["text"] and ok.payload["bytes"] > 0 and ok.ms > 0
    assert failed.payload["error_kind"] == "http_status" and failed.payload["final_url"] == server.url("/missing")


def test_concurrent_fetches_of_one_url_make_one_request(server: WebServer) -> None:
    server.route("/slowish", Route(headers={"Content-Type": "text/html"}, body=page("Shared").encode(), drip=0.0005))
    fetcher = fetcher_for(server)[0]
    results: list[FetchResult] = []
    threads = [threading.Thread(target=lambda: results.append(fetcher.fetch(server.url("/slowish"))))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6 and all(r.ok and r.title == "Shared" for r in results)
    assert server.count("/slowish") == 1


class DictCorpus:
    def __init__(self, pages: dict[str, SavedPage]) -> None:
        self.pages = pages

    def get(self, url: str) -> SavedPage | None:
        return self.pages.get(url)


def test_corpus_mode_serves_saved_pages_without_any_network() -> None:
    url = "https://news.example.com/story"
    corpus = DictCorpus({url: SavedPage(url=url, content_type="text/html; charset=shift_jis",
                                        body=page("水質", JAPANESE * 3).encode("shift_jis"), final_url=url + "?p=1")})
    backend = LoopbackOnly()
    budget = Budget(BudgetLimits(fetches=5, reserve=0.0), price_of=lambda m: None)  # type: ignore[arg-type,return-value]
    fetcher = Fetcher(Settings(), resolve=no_dns, network_backend=backend, corpus=corpus, budget=budget)
    saved = fetcher.fetch(url)
    assert saved.ok and JAPANESE in (saved.text or "") and saved.final_url == url + "?p=1"
    missing = fetcher.fetch("https://news.example.com/other")
    assert missing.error_kind == "blocked" and "offline corpus" in (missing.error or "")
    assert backend.connects == [] and budget.used().fetches == 1


# ---------------------------------------------------------------------------------------------------------------
# CLI: python -m pipeline fetch URL --json

@pytest.mark.skipif(not (ROOT / "pipeline" / "__main__.py").exists(), reason="the CLI is not wired yet")
def test_cli_fetch_json(server: WebServer) -> None:
    server.route("/cli", Route.html(page("From the CLI")))
    env = {**os.environ, "RESEARCH_FETCH_ALLOW": server.host_port}

    def run(path: str) -> tuple[int, dict[str, object]]:
        proc = subprocess.run([sys.executable, "-m", "pipeline", "fetch", server.url(path), "--json"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60)
        return proc.returncode, json.loads(proc.stdout)

    code, data = run("/cli")
    assert code == 0 and data["ok"] is True and data["title"] == "From the CLI"
    assert set(data) == {"ok", "error_kind", "error", "url", "final_url", "status", "content_type", "title", "text",
                         "published", "truncated", "bytes"}
    code, data = run("/nope")
    assert code == 1 and data["error_kind"] == "http_status" and data["status"] == 404


@pytest.mark.parametrize("location,reason", [
    ("http://[::1", "cannot be parsed"), ("http://a\tb/", "cannot be parsed"), ("//[bad", "cannot be parsed"),
    ("http://exa mple.com/", "refused URL"), ("http://h:99999/", "refused URL")])
def test_a_redirect_to_an_unparseable_location_is_blocked_with_the_reason(location: str, reason: str) -> None:
    with WebServer({"/r": Route.redirect(location)}) as web:
        fetcher, _ = fetcher_for(web)
        result = fetcher.fetch(web.url("/r"))
    assert not result.ok and result.error_kind == "blocked" and reason in (result.error or "")


def test_a_meta_charset_is_read_as_the_former_pattern_read_it() -> None:
    # Only the group is read. The former pattern split a long space run between two `\s*` in quadratically many
    # ways, and read each unclosed <meta from its start to the end.
    former = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([a-zA-Z0-9_.:-]+)", re.I)
    tokens = ["<meta", "<META", " ", ">", "charset", "CharSet", "=", "'", '"', "utf-8", "x", "<", "\t"]
    for text in token_texts(tokens, count=4000):
        old, new = former.search(text.encode()), charset._META_CHARSET.search(text.encode())
        assert (old and old.group(1)) == (new and new.group(1)), text
