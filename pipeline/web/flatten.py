"""Deeply nested HTML -> the same HTML with elements past a depth left out and their text kept.

libxml2 stops building the tree at 255 levels (2,047 with huge_tree) and drops what lies deeper, so a page whose
text sits inside 20,000 nested <div>s or <b>s parsed as empty. The markup is re-tokenised here, in one linear
pass of the standard library's HTML tokenizer, and written back with every element deeper than MAX_DEPTH
unwrapped: its tags go, its text (entities as written) stays, and a block element past the depth leaves a line
break so that its paragraphs stay apart.
"""
from __future__ import annotations

from html.parser import HTMLParser

MAX_DEPTH = 160  # well above real pages (rarely past 60) and well below libxml2's limit
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                   "track", "wbr"})
_BLOCKS = frozenset({"p", "div", "li", "tr", "td", "th", "table", "section", "article", "blockquote", "pre", "h1",
                     "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "dd", "dt", "main", "header", "footer"})


class _Flattener(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.open: list[tuple[str, bool]] = []  # open elements: name, and whether its tags were written

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        kept = len(self.open) < MAX_DEPTH
        if kept:
            self.out.append(self.get_starttag_text() or f"<{tag}>")
        elif (tag in _BLOCKS or tag == "br") and self.out[-1:] != ["<br>"]:  # one break per run of blocks
            self.out.append("<br>")
        if tag not in _VOID:
            self.open.append((tag, kept))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if len(self.open) < MAX_DEPTH:
            self.out.append(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        # An end tag closes the innermost open element of its name and every element opened inside it; one that
        # matches nothing open is dropped, as browsers drop it. The scan is bounded, so this stays linear.
        for back in range(1, min(len(self.open), 64) + 1):
            if self.open[-back][0] == tag:
                for name, kept in reversed(self.open[-back:]):
                    if kept:
                        self.out.append(f"</{name}>")
                del self.open[-back:]
                return

    def handle_data(self, data: str) -> None:
        self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        self.out.append(f"&{name};")  # "&amp" and "&amp;" read alike

    def handle_charref(self, name: str) -> None:
        self.out.append(f"&#{name};")

    def handle_decl(self, decl: str) -> None:
        self.out.append(f"<!{decl}>")


def flatten(html: str) -> str:
    """`html` with elements nested deeper than MAX_DEPTH unwrapped (text kept); comments are left out."""
    parser = _Flattener()
    parser.feed(html)
    parser.close()
    return "".join(parser.out)
