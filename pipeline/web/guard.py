"""URL and address policy for pages a model asks for (SSRF guard): a URL comes back Vetted, with the one address
to connect to, or Blocked, with a reason written for the model. Nothing here touches the network except the one
name lookup done through the injected resolver.

Rules: http and https only; no user name or password; no control characters, spaces or backslashes; at most
MAX_URL_CHARS; ports in Settings.fetch_ports; the host a public DNS name or IP literal (numeric spellings such as
2130706433, 0x7f.1, 0177.0.0.1 and 127.1 are parsed here the way browsers and inet_aton do, so the address is
checked, not the string); the name resolved exactly once and refused if ANY address is not publicly routable
(see is_public_address). Settings.fetch_allow holds exact `host:port` pairs (host as written in the URL, lower
case) whose port and addresses are not checked; it never relaxes the scheme, userinfo or character rules.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, urlsplit

import idna

from pipeline.config import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Sequence[str]]

MAX_URL_CHARS = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
# Names that only ever mean "a machine on this network" (RFC 6761, RFC 8375, and cloud metadata names).
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".lan", ".intranet", ".corp")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# IANA special-purpose ranges that are not globally reachable, listed here as well because the standard
# library's is_global has changed between Python releases (3.11.7 calls 192.0.0.8 and fec0::1 global).
_SPECIAL = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "224.0.0.0/4", "240.0.0.0/4",
    "::/96", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "3fff::/20", "5f00::/16",
    "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
))
_KEEP_IN_TARGET = "!$&'()*+,/:;=?@~%[]"


def default_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host`, in its order (one lookup); OSError if none."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class Vetted:
    """A URL that passed the policy: connect to `ip`, but speak to `host` (Host header, TLS SNI and certificate)."""

    scheme: str
    host: str
    port: int
    ip: str
    target: str

    @property
    def host_header(self) -> str:
        """The Host header value: the host, with the port only when it is not the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if DEFAULT_PORTS[self.scheme] == self.port else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """The URL as the page knows itself (used for relative links and redirects)."""
        return f"{self.scheme}://{self.host_header}{self.target}"

    @property
    def connect_url(self) -> str:
        """The same URL addressed to the vetted IP, so no second name lookup can change where we connect."""
        ip = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"{self.scheme}://{ip}:{self.port}{self.target}"


@dataclass(frozen=True)
class Blocked:
    """The URL was refused; `reason` is one line for the model. A name that does not resolve is a network fault."""

    reason: str
    error_kind: Literal["blocked", "network"] = "blocked"


def check_url(url: str, settings: Settings, resolve: Resolver = default_resolver) -> Vetted | Blocked:
    """Vet `url` against the policy in the module docstring, resolving its host at most once."""
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        return Blocked(f"the URL is longer than {MAX_URL_CHARS} characters")
    if _BAD_CHARS.search(url):
        return Blocked("the URL contains spaces, control characters or backslashes")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return Blocked("the URL is malformed (bad brackets or port)")
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        return Blocked(f"only http and https URLs are fetched, not {scheme + ':' if scheme else 'relative'} URLs")
    if "@" in parts.netloc:
        return Blocked("URLs with a user name or password are not fetched")
    written = parts.hostname or ""
    if not written:
        return Blocked("the URL has no host")
    port = DEFAULT_PORTS[scheme] if port is None else port
    allowed = f"{written}:{port}" in settings.fetch_allow or f"[{written}]:{port}" in settings.fetch_allow

    host = _ascii_host(written)
    if isinstance(host, Blocked):
        return host
    literal = _ip_literal(host)
    if isinstance(literal, Blocked):
        return literal
    if not allowed:
        if literal is None and ("." not in host or host == "localhost" or host.endswith(_LOCAL_SUFFIXES)):
            return Blocked(f"{host} is not a public domain name")
        if port not in settings.fetch_ports:
            return Blocked(f"port {port} is not fetched (allowed: {', '.join(map(str, sorted(settings.fetch_ports)))})")

    addresses = _resolve(host, port, resolve) if literal is None else [literal]
    if isinstance(addresses, Blocked):
        return addresses
    bad = [a for a in addresses if not is_public_address(a)]
    if bad and not allowed:
        return Blocked(f"{host} points to a private or reserved address ({bad[0]}), which is never fetched")
    # Cloud Run has no IPv6 egress by default, so an IPv4 address is preferred when the name has both.
    chosen = next((a for a in addresses if a.version == 4), addresses[0])
    target = quote(parts.path, safe=_KEEP_IN_TARGET) or "/"
    if parts.query:
        target += "?" + quote(parts.query, safe=_KEEP_IN_TARGET)
    return Vetted(scheme=scheme, host=host, port=port, ip=str(chosen), target=target)


def is_public_address(ip: IPAddress) -> bool:
    """True only for globally routable unicast addresses, including every IPv4 address an IPv6 form embeds."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return False
        embedded = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
        if ip in _NAT64 or ip in _IPV4_COMPATIBLE:
            embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if any(v4 is not None and not is_public_address(v4) for v4 in embedded):
            return False
    return ip.is_global and not (
        any(ip in net for net in _SPECIAL if net.version == ip.version)
        or ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved
        or ip.is_unspecified
    )


def _ascii_host(written: str) -> str | Blocked:
    """The host in lower-case ASCII (IDNA/UTS 46 for non-ASCII names), without a trailing dot."""
    if ":" in written:  # an IPv6 literal; urlsplit already removed the brackets
        return written
    host = written
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError):
            return Blocked("the host name is not a valid international domain name")
    host = host.lower().removesuffix(".")
    if not host or len(host) > 253:
        return Blocked("the host name is empty or longer than 253 characters")
    return host


def _ip_literal(host: str) -> IPAddress | None | Blocked:
    """The address a numeric host spells (None for a DNS name); a malformed number is refused, never looked up."""
    if ":" in host:
        if "%" in host:
            return Blocked("IPv6 addresses with a zone (%) are not fetched")
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            return Blocked("the host is not a valid IPv6 address")
    labels = host.split(".")
    if _NUMERIC_LABEL.match(labels[-1]):
        v4 = _parse_ipv4(labels)
        return v4 if v4 is not None else Blocked("the host looks like a malformed IP address")
    if not all(_LABEL.match(label) for label in labels):
        return Blocked("the host name contains characters a domain name cannot have")
    return None


def _parse_ipv4(labels: list[str]) -> ipaddress.IPv4Address | None:
    """IPv4 in every inet_aton spelling (1 to 4 parts, each decimal, 0-octal or 0x-hex), as the WHATWG URL spec."""
    if not 1 <= len(labels) <= 4:
        return None
    numbers: list[int] = []
    for label in labels:
        try:
            if label.startswith("0x"):
                numbers.append(int(label[2:] or "0", 16))
            elif len(label) > 1 and label.startswith("0"):
                numbers.append(int(label, 8))
            else:
                numbers.append(int(label, 10))
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _resolve(host: str, port: int, resolve: Resolver) -> list[IPAddress] | Blocked:
    try:
        answers = list(resolve(host, port))
    except (OSError, UnicodeError):
        return Blocked(f"the host name {host} could not be resolved", "network")
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            addresses.append(ipaddress.ip_address(answer))
        except ValueError:
            return Blocked(f"{host} resolved to something that is not an IP address")
    return addresses or Blocked(f"the host name {host} has no addresses", "network")
