"""Bytes to text as a browser would: BOM, declared charset, <meta> charset, UTF-8, then detection."""
from __future__ import annotations

import codecs
import re

from charset_normalizer import from_bytes

_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([a-zA-Z0-9_.:-]+)", re.I)
# Browsers decode these labels as the Windows code pages that extend them (WHATWG Encoding); pages rely on it.
_SUPERSETS = {"iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254", "iso8859-11": "cp874",
              "tis-620": "cp874", "shift_jis": "cp932", "euc_kr": "cp949", "gb2312": "gb18030", "gbk": "gb18030",
              "utf-16": "utf-16-le"}
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
    if codec:
        return body.decode(codec, errors="replace")
    try:  # a body cut at the cap may end inside a character: decode all but that partial tail
        return codecs.getincrementaldecoder("utf-8")().decode(body, final=not truncated)
    except UnicodeDecodeError:
        best = from_bytes(body[:200_000]).best()
        return body.decode((_codec(best.encoding) if best else None) or "cp1252", errors="replace")


def _codec(label: str | None) -> str | None:
    """The Python codec a charset label means to a browser; None for an unknown or missing label."""
    label = (label or "").strip().strip("\"'").lower()
    try:
        name = codecs.lookup(_LABELS.get(label, label)).name if label else None
    except LookupError:
        return None
    return _SUPERSETS.get(name, name) if name else None
