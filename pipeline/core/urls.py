"""URL normalisation: one key per page, so the same page fetched by two spellings is one source."""
from __future__ import annotations

from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
_TRACKING_PREFIXES = ("utm_",)
_TRACKING_NAMES = frozenset({"fbclid", "gclid", "mc_cid", "mc_eid"})


def normalise_url(url: str) -> str:
    """Lower-case scheme and host, drop default port, fragment, tracking parameters and trailing slash."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    try:
        host = host.encode("idna").decode("ascii") if host else host
    except UnicodeError:
        pass
    host = host.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    if parts.username or parts.password:
        userinfo = parts.username or ""
        if parts.password:
            userinfo += ":" + parts.password
        netloc = f"{userinfo}@{netloc}"
    path = quote(unquote(parts.path), safe="/%:@!$&'()*+,;=~-._") or "/"
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    query = [
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not k.lower().startswith(_TRACKING_PREFIXES) and k.lower() not in _TRACKING_NAMES
    ]
    return urlunsplit((scheme, netloc, path, urlencode(query, doseq=True), ""))


def url_key(url: str) -> str:
    """The key of the page at `url`, to compare and look up URLs by: normalise_url(url), or the URL stripped.

    The fallback is for text that does not parse as a URL (such as an unclosed IPv6 bracket): stripped, because
    normalise_url strips too, so a malformed URL padded with spaces keys the same as unpadded, as a valid one does.
    """
    try:
        return normalise_url(url)
    except ValueError:
        return url.strip()
