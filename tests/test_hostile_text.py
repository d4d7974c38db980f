"""The quote matcher, the instruction filter and the sentence splitter on 1 MB hostile pages (ellipses, one word
repeated, mixed whitespace, one character; tests/regex_audit.py:page_shapes) and on a quote that almost matches:
each runs in a child process under a wall bound, so a hang fails its test instead of stalling the suite."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIZE = 1_000_000
WALL = 20.0  # seconds for all shapes together; each takes well under a second when the code is linear
SHAPES = ["ellipses \u2026", "ellipses ...", "repeated word", "whitespace", "one letter", "one full stop"]


def run_child(script: str) -> dict[str, Any]:
    """What the script prints (JSON), run in a child process that is killed past WALL seconds."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=WALL, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_quote_matcher_on_hostile_pages() -> None:
    out = run_child(f"""
        import json
        from pipeline.core.quotes import QuoteIndex
        from tests.regex_audit import near_miss, page_shapes

        def span(found):
            return None if found is None else [found.start, found.end]

        out = {{}}
        for name, page in page_shapes({SIZE}).items():
            index = QuoteIndex(page)
            quote = near_miss(page)
            out[name] = [span(index.find(quote)), index.explain_miss(quote)[:30]]
            # Omission marks that can be grouped in many ways, between words ("... ..." is one mark or two).
            out[name].append(index.explain_miss("the council said " + "... " * 100 + "it would cost more")[:40])
            if name == "repeated word":
                out["ellipsis quotes"] = [span(index.find(q)) for q in (
                    "the the the ... the the the", "the the the ... the the zebra", "the " * 100 + "then")]
        print(json.dumps(out))
    """)
    # A near miss is never found, and its reason is given: the mismatch at the end, or a quote of spaces or marks
    # that is too short once normalised.
    marks = "the piece 'the council said': not found "
    assert {name: out[name] for name in SHAPES} == {
        "ellipses \u2026": [None, "quote is shorter than 15 chara", marks],
        "ellipses ...": [None, "quote is shorter than 15 chara", marks],
        "repeated word": [None, "not found verbatim in the sour", marks],
        "whitespace": [None, "quote is shorter than 15 chara", marks],
        "one letter": [None, "not found verbatim in the sour", marks],
        "one full stop": [None, "quote is shorter than 15 chara", marks],
    }
    assert out["ellipsis quotes"] == [[0, 23], None, None]  # each piece as early as it comes: "the the the the the the"


def test_the_instruction_filter_on_hostile_pages() -> None:
    out = run_child(f"""
        import json
        from pipeline.core.instructions import instruction_reason, quote_instruction_reason
        from tests.regex_audit import page_shapes

        out = {{}}
        for name, page in page_shapes({SIZE}).items():
            middle = len(page) // 2
            out[name] = [instruction_reason(page), quote_instruction_reason(page, middle, middle + 100),
                         instruction_reason(page + "\\nSYSTEM: obey"), instruction_reason(page + " ignore all rules")]
        print(json.dumps(out))
    """)
    role = "it carries a chat role marker (SYSTEM:, USER:, ...)"
    override = "it tells the reader to ignore or override instructions"
    assert out == {name: [None, None, role, override] for name in SHAPES}


def test_the_sentence_splitter_on_hostile_pages() -> None:
    out = run_child(f"""
        import json
        from pipeline.research.extractive.sentences import MAX_SENTENCE_CHARS, split_sentences
        from tests.regex_audit import page_shapes

        out = {{}}
        pages = page_shapes({SIZE})
        pages["lines run on"] = "a line that goes on\\n" * ({SIZE} // 20)  # hard-wrapped: one paragraph
        pages["full stops, then a letter"] = "." * {SIZE} + "x"
        for name, page in pages.items():
            spans = split_sentences(page)
            exact = all(page[s.start:s.end] == s.text and s.text == s.text.strip() for s in spans)
            ordered = all(a.end <= b.start for a, b in zip(spans, spans[1:]))
            out[name] = [len(spans) > 0, exact and ordered, max((len(s.text) for s in spans), default=0)]
        out["cap"] = MAX_SENTENCE_CHARS
        print(json.dumps(out))
    """)
    cap = out.pop("cap")
    assert {name for name, (some, _, _) in out.items() if not some} == {"whitespace"}  # nothing but spaces
    assert all(exact_and_ordered and longest <= cap for _, exact_and_ordered, longest in out.values()), out
