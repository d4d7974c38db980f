"""Wraps page text for a model in delimiters the page cannot close: a fresh random nonce per wrap."""
from __future__ import annotations

import re
import secrets

TAG = "untrusted_page"
# Any spelling of our tag inside page text is defused, so a page cannot fake an end marker.
# Runs taken whole (`*+`): split between the two `\s*` around an optional "/", a long space run was tried in
# quadratically many ways.
_TAG_LIKE = re.compile(r"<\s*+/?\s*+untrusted[_\s-]*+page", re.IGNORECASE)


def defuse(text: str) -> str:
    """Page text with anything resembling our delimiter tag neutralised."""
    return _TAG_LIKE.sub(lambda m: m.group(0).replace("<", "‹"), text)


def wrap(text: str, *, source_id: str, title: str | None = None, nonce: str | None = None) -> str:
    """`text` inside <untrusted_page> markers carrying a nonce the page could not have guessed."""
    nonce = nonce or secrets.token_hex(8)
    safe_title = defuse((title or "").replace('"', "'"))[:200]
    return (
        f'<{TAG} id="{nonce}" source="{source_id}" title="{safe_title}">\n'
        f"{defuse(text)}\n"
        f'</{TAG} id="{nonce}">'
    )


_JSON_NONCE = re.compile(r'(untrusted_page id=\\")[0-9a-f]+(\\")')


def without_nonces(json_text: str) -> str:
    """JSON text with each page wrapper's random nonce blanked, so two sendings of one page compare equal."""
    return _JSON_NONCE.sub(r"\1-\2", json_text)
