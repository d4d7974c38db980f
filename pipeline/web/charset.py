"""Bytes to text as a browser would: BOM, declared charset, <meta> charset, UTF-8, then detection."""
from __future__ import annotations

import codecs
import re

from charset_normalizer import from_bytes

_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
# Only its group is read. A tag is read up to the next "<meta" at most: a charset past it is found from there, the
# same one, and unclosed tags are not each read to the end (quadratic). Space runs are taken whole (`*+`): split
# between the two `\s*` around an optional quote, a long run was tried in quadratically many ways.
_META_CHARSET = re.compile(rb"<meta(?:(?!<meta)[^>])*?charset\s*+=\s*+[\"']?\s*+([a-zA-Z0-9_.:-]+)", re.I)
# Browsers decode these labels as the Windows code pages that extend them (WHATWG Encoding); pages rely on it.
_SUPERSETS = {"iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254", "iso8859-11": "cp874",
              "tis-620": "cp874", "shift_jis": "cp932", "euc_kr": "cp949", "gb2312": "gb18030", "gbk": "gb18030",
              "utf-16": "utf-16-le"}
_UTF8_MULTIBYTE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
_LABELS = {"x-sjis": "cp932", "windows-31j": "cp932", "x-gbk": "gb18030", "x-mac-roman": "mac_roman"}


def decode_text(body: bytes, declared: str | None, *, html: bool, truncated: bool = False) -> str:
    """Bytes as text: BOM, then the declared charset, then (HTML) a <meta> charset, then UTF-8, then detection."""
    for bom, bom_codec in _BOMS:
        if body.startswith(bom):
            return body.decode(bom_codec, errors="replace")
    codec = _codec(declared)
    if codec is None and html:
        meta = _META_CHARSET.search(body[:8192])
        codec = _codec(meta.group(1).decode("ascii")) if meta else None
        if codec and codec.startswith("utf-16"):
            codec = "utf-8"  # a <meta> readable as ASCII cannot be in UTF-16 (WHATWG)
    if codec and codec != "utf-8":
        return body.decode(codec, errors="replace")
    try:  # a body cut at the cap may end inside a character: decode all but that partial tail
        return codecs.getincrementaldecoder("utf-8")().decode(body, final=not truncated)
    except UnicodeDecodeError:
        # Not UTF-8, whatever it says: a Windows-1252 page labelled UTF-8 would lose its euro and pound signs
        # to U+FFFD, and a quote with them could never match. Detection names what the bytes are.
        # A declared UTF-8 page that does hold UTF-8 characters keeps UTF-8: one stray byte must not turn
        # every accented letter into mojibake.
        if codec and _UTF8_MULTIBYTE.search(body):
            return body.decode("utf-8", errors="replace")
        return body.decode(_detected(body), errors="replace")


def _detected(body: bytes) -> str:
    """The codec detection names for `body`; of encodings that fit it equally well, Windows-1252 (the web's
    default for Western pages, which 1250 and 775 tie with on a short Latin text), else the best; cp1252 if none."""
    matches = list(from_bytes(body[:200_000]))
    if not matches:
        return "cp1252"
    least = min(m.chaos for m in matches)
    tied = [m.encoding for m in matches if m.chaos <= least]
    return "cp1252" if "cp1252" in tied else (_codec(tied[0]) or "cp1252")


def _codec(label: str | None) -> str | None:
    """The Python codec a charset label means to a browser; None for an unknown or missing label."""
    label = (label or "").strip().strip("\"'").lower()
    try:
        name = codecs.lookup(_LABELS.get(label, label)).name if label else None
    except LookupError:
        return None
    return _SUPERSETS.get(name, name) if name else None
