"""URL and address policy: every hostile spelling is refused, real public URLs pass, names are resolved once.

No test here does real DNS for anything but `localhost`: names go through an injected resolver that records calls.
"""
from __future__ import annotations

import ipaddress
import socket

import pytest

from pipeline.config import Settings
from pipeline.web.guard import MAX_URL_CHARS, Blocked, Vetted, check_url, default_resolver, is_public_address

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


class FakeDNS:
    """A resolver from a table; records every lookup; unknown names fail like NXDOMAIN."""

    def __init__(self, table: dict[str, list[str]] | None = None) -> None:
        self.table = table or {}
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


DNS_TABLE = {
    "example.com": [PUBLIC_V4],
    "dual.example.com": [PUBLIC_V6, PUBLIC_V4],
    "v6only.example.com": [PUBLIC_V6],
    "xn--bcher-kva.example": [PUBLIC_V4],
    "localhost": ["127.0.0.1", "::1"],
    "evil.test": ["127.0.0.1"],
    "metadata.google.internal": ["169.254.169.254"],
    "mixed.test": [PUBLIC_V4, "127.0.0.1"],
    "mixed-reversed.test": ["10.0.0.1", PUBLIC_V4],
    "mixed6.test": [PUBLIC_V6, "fe80::1"],
    "cgnat.test": ["100.64.3.4"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "nat64.test": ["64:ff9b::a00:1"],
    "127.0.0.1.nip.io": ["127.0.0.1"],
    "junk.test": ["not-an-address"],
    "empty.test": [],
}


@pytest.fixture()
def dns() -> FakeDNS:
    return FakeDNS(dict(DNS_TABLE))


def vet(url: str, dns: FakeDNS, **settings: str) -> Vetted | Blocked:
    return check_url(url, Settings(**settings), dns)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "host", "port", "ip", "target", "scheme"),
    [
        ("https://example.com/a/b?x=1#frag", "example.com", 443, PUBLIC_V4, "/a/b?x=1", "https"),
        ("HTTP://EXAMPLE.COM.", "example.com", 80, PUBLIC_V4, "/", "http"),
        ("  http://example.com:80/p  ", "example.com", 80, PUBLIC_V4, "/p", "http"),
        ("http://bücher.example/straße?q=ä", "xn--bcher-kva.example", 80, PUBLIC_V4, "/stra%C3%9Fe?q=%C3%A4", "http"),
        ("http://dual.example.com/", "dual.example.com", 80, PUBLIC_V4, "/", "http"),  # IPv4 preferred
        ("http://v6only.example.com/", "v6only.example.com", 80, PUBLIC_V6, "/", "http"),
        ("http://8.8.8.8/dns", "8.8.8.8", 80, "8.8.8.8", "/dns", "http"),
        ("http://[2001:4860:4860::8888]/", "2001:4860:4860::8888", 80, "2001:4860:4860::8888", "/", "http"),
        ("http://example.com/%7Euser/a%20b", "example.com", 80, PUBLIC_V4, "/%7Euser/a%20b", "http"),
    ],
)
def test_public_urls_are_vetted(url: str, host: str, port: int, ip: str, target: str, scheme: str,
                                dns: FakeDNS) -> None:
    assert vet(url, dns) == Vetted(scheme=scheme, host=host, port=port, ip=ip, target=target)


def test_the_name_is_resolved_exactly_once_with_its_port(dns: FakeDNS) -> None:
    vet("https://example.com/x", dns)
    assert dns.calls == [("example.com", 443)]


def test_ip_literals_are_never_looked_up(dns: FakeDNS) -> None:
    for url in ("http://8.8.8.8/", "http://2130706433/", "http://[::1]/", "http://0x7f.1/"):
        vet(url, dns)
    assert dns.calls == []


def test_vetted_urls_address_the_ip_but_name_the_host() -> None:
    v4 = Vetted(scheme="https", host="example.com", port=443, ip=PUBLIC_V4, target="/a?b=1")
    assert v4.connect_url == f"https://{PUBLIC_V4}:443/a?b=1"
    assert (v4.url, v4.host_header) == ("https://example.com/a?b=1", "example.com")
    v6 = Vetted(scheme="http", host="example.com", port=8080, ip=PUBLIC_V6, target="/")
    assert v6.connect_url == f"http://[{PUBLIC_V6}]:8080/"
    assert v6.host_header == "example.com:8080"
    literal = Vetted(scheme="http", host="2001:db8::1", port=80, ip="2001:db8::1", target="/")
    assert literal.host_header == "[2001:db8::1]"


HOSTILE = [
    # loopback in every numeric spelling: the address is parsed and checked, never the string
    "http://127.0.0.1/", "http://127.8.9.10/", "http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1/",
    "http://127.1/", "http://0x7f000001/", "http://017700000001/", "http://0x7f.0x0.0x0.0x1/",
    "http://127.000.000.001/", "http://１２７.０.０.１/", "http://[::1]/", "http://[0:0:0:0:0:0:0:1]/",
    # unspecified, private, link-local (the cloud metadata server), CGNAT, multicast, reserved, broadcast
    "http://0.0.0.0/", "http://0/", "http://[::]/", "http://10.0.0.1/", "http://172.16.0.1/", "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://100.64.0.1/", "http://224.0.0.1/",
    "http://[ff02::1]/", "http://240.0.0.1/", "http://255.255.255.255/", "http://[fc00::1]/", "http://[fec0::1]/",
    "http://192.0.2.1/", "http://198.18.0.1/",
    # IPv6 forms that embed a bad IPv4 address
    "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "http://[::ffff:169.254.169.254]/",
    "http://[::127.0.0.1]/", "http://[2002:7f00:1::]/", "http://[2002:a9fe:a9fe::1]/", "http://[64:ff9b::127.0.0.1]/",
    "http://[64:ff9b::a9fe:a9fe]/", "http://[64:ff9b:1::7f00:1]/",
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo client 127.0.0.1
    "http://[2001:0:7f00:1:8000:63bf:3fff:fdd2]/",  # Teredo server 127.0.0.1
    # names that resolve (or only ever resolve) inside the network
    "http://localhost/", "http://LOCALHOST./", "http://api.localhost/", "http://evil.test/",
    "http://metadata.google.internal/computeMetadata/v1/", "http://127.0.0.1.nip.io/", "http://intranet/",
    "http://cgnat.test/", "http://mapped.test/", "http://nat64.test/",
    # one bad address among good ones, in either order
    "http://mixed.test/", "http://mixed-reversed.test/", "http://mixed6.test/",
    # schemes, userinfo and parser-confusion tricks
    "file:///etc/passwd", "gopher://127.0.0.1:70/_GET", "dict://127.0.0.1:11211/stats", "ftp://example.com/",
    "data:text/html,<h1>x</h1>", "javascript:alert(1)", "http://example.com@127.0.0.1/",
    "http://user:pass@example.com/", "http://@example.com/", "http://:@example.com/", "http://127.0.0.1#@example.com/", "http://127.0.0.1\\@example.com/",
    "http://%31%32%37.0.0.1/", "http://[fe80::1%25eth0]/", "http://1.2.3.4.5/", "http://999.0.0.1/",
    "//example.com/", "http:///example.com/", "http://example.com:22/", "http://8.8.8.8:6379/",
    "http://example.com/" + "a" * MAX_URL_CHARS, "http://exa mple.com/", "http://example.com/\r\nX-Injected: 1",
    "http://exa_mple..com/", "http://[::1/",
]


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_urls_are_blocked(url: str, dns: FakeDNS) -> None:
    result = vet(url, dns)
    assert isinstance(result, Blocked), result
    assert result.error_kind == "blocked"
    assert result.reason and "\n" not in result.reason


def test_there_are_at_least_fifty_hostile_cases() -> None:
    assert len(set(HOSTILE)) >= 50


def test_rebinding_cannot_move_the_connection(dns: FakeDNS) -> None:
    """The first answer is public, every later one loopback: the one lookup decides the address we connect to."""
    answers = iter([[PUBLIC_V4]])
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers, ["127.0.0.1"])

    vetted = check_url("http://rebind.example.com/", Settings(), rebinding)
    assert isinstance(vetted, Vetted)
    assert calls == ["rebind.example.com"]
    assert vetted.ip == PUBLIC_V4 and vetted.connect_url.startswith(f"http://{PUBLIC_V4}:80/")


def test_unresolvable_or_empty_names_are_network_faults(dns: FakeDNS) -> None:
    for url in ("http://nowhere.example.com/", "http://empty.test/"):
        result = vet(url, dns)
        assert isinstance(result, Blocked) and result.error_kind == "network", (url, result)
    junk = vet("http://junk.test/", dns)
    assert isinstance(junk, Blocked) and junk.error_kind == "blocked"


def test_ports_follow_settings(dns: FakeDNS) -> None:
    assert isinstance(vet("http://example.com:8080/", dns), Blocked)
    assert isinstance(vet("http://example.com:8080/", dns, fetch_ports_raw="80,8080"), Vetted)
    assert isinstance(vet("https://example.com/", dns, fetch_ports_raw="80"), Blocked)


def test_allow_list_is_exact_and_widens_only_address_and_port(dns: FakeDNS) -> None:
    allow = {"fetch_allow_raw": "127.0.0.1:8765, evil.test:9000"}
    assert vet("http://127.0.0.1:8765/p", dns, **allow) == Vetted("http", "127.0.0.1", 8765, "127.0.0.1", "/p")
    assert isinstance(vet("http://evil.test:9000/", dns, **allow), Vetted)
    for url in (
        "http://127.0.0.1:8766/",  # another port
        "http://127.0.0.1/",  # the default port is port 80, not the allowed one
        "http://2130706433:8765/",  # the same address spelled differently is not the allowed host
        "http://localhost:8765/",
        "http://evil.test/",
        "http://user@127.0.0.1:8765/",  # userinfo stays refused
        "ftp://127.0.0.1:8765/",  # so do other schemes
        "http://127.0.0.1:8765\\@x/",
    ):
        assert isinstance(vet(url, dns, **allow), Blocked), url


def test_allow_list_accepts_bracketed_ipv6() -> None:
    result = check_url("http://[::1]:8765/", Settings(fetch_allow_raw="[::1]:8765"), FakeDNS())
    assert result == Vetted("http", "::1", 8765, "::1", "/")


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", PUBLIC_V4, PUBLIC_V6, "2001:4860:4860::8888", "2002:808:808::1"],
)
def test_public_addresses_are_public(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.1.1.1", "172.31.255.255", "192.168.0.1", "169.254.169.254", "100.64.0.1", "100.127.255.254",
        "0.0.0.0", "224.0.0.251", "239.255.255.250", "240.0.0.1", "255.255.255.255", "192.0.0.8", "198.51.100.7",
        "::", "::1", "fe80::1", "fec0::1", "fc00::1", "fd12:3456::1", "ff02::1", "ff0e::1", "2001:db8::1",
        "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::127.0.0.1", "::a9fe:a9fe", "2002:7f00:1::", "2002:a00:1::",
        "2002:6440:1::", "64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b:1::808:808",
        "2001:0:4136:e378:8000:63bf:80ff:fffe", "2001:0:7f00:1:8000:63bf:3fff:fdd2", "fe80::1%eth0",
    ],
)
def test_private_and_special_addresses_are_not_public(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))


def test_sixtofour_is_judged_by_the_address_it_embeds() -> None:
    """2002::/16 counts as global to the standard library; only the embedded IPv4 address tells the two apart."""
    good, bad = ipaddress.ip_address("2002:808:808::1"), ipaddress.ip_address("2002:a9fe:a9fe::1")
    assert good.is_global and bad.is_global
    assert is_public_address(good) and not is_public_address(bad)


def test_default_resolver_does_one_system_lookup() -> None:
    addresses = default_resolver("localhost", 80)
    assert addresses and all(ipaddress.ip_address(a).is_loopback for a in addresses)
    assert len(addresses) == len(set(addresses))
    with pytest.raises(OSError):
        default_resolver("name.invalid", 80)
