"""Every regex of pipeline/ and ui/ runs in linear time on hostile text built from its own structure
(tests/regex_audit.py), a backtracking one is caught, and a pattern added anywhere is audited without being listed."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.regex_audit import (
    BOUND,
    GROWTH_LIMIT,
    GROWTH_SCALE,
    FoundPattern,
    Timing,
    all_patterns,
    audit,
    inline_patterns,
)

# The former _GLYPH_TOKEN of pipeline/web/extract.py: "/g152" reads as /?g + hex or as / + letter + digits, so a
# long token that fails at its end is retried in exponentially many ways. With the textbook cases of nesting.
KNOWN_BAD = {
    "old _GLYPH_TOKEN": r"^(?:/?(?:g|G|glyph|uni|u)[0-9A-Fa-f]{1,6}|\(cid:\d+\)|/[A-Za-z]?\d+)+$",
    "(a+)+$": r"(a+)+$",
    r"(\w+\s?)*$": r"(\w+\s?)*$",
    "(x|x)*y": r"(x|x)*y",
}
BAD_DEADLINE = 3.0  # a backtracking pattern never finishes; a linear one takes milliseconds
# Former patterns of pipeline/research/steps/defang.py, quadratic: each start of a run of near-matches read on to
# the run's end. On 5 KB each takes well under the bound (20 ms to a few tenths of a second; a 1 MB report would take
# minutes) and is caught by its growth at 4x the size (about 16x). The link pattern is slowest on a prefix of its
# shortest match repeated ("[", "[a](").
QUADRATIC = {
    "former _REF_DEF": (r"^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?.*(?:\n|$)", re.M),
    "former _AUTOLINK": (r"<((?:https?|ftp)://[^>\s]+)>", re.I),
    "former _LINK": (r"(?<![!\\])\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)", 0),
}


@pytest.fixture(scope="module")
def found() -> tuple[list[FoundPattern], list[str]]:
    return all_patterns()


def test_enumeration_finds_the_patterns_of_pipeline_and_ui(found: tuple[list[FoundPattern], list[str]]) -> None:
    patterns, problems = found
    ids = {p.id for p in patterns}
    print(f"{len(patterns)} patterns found in pipeline/ and ui/")
    assert len(patterns) >= 170, len(patterns)
    assert len(ids) == len(patterns)  # each id names one pattern
    assert {"pipeline/web/extract.py:_GLYPH_TOKEN", "pipeline/core/quotes.py:_PLAIN", "pipeline/core/quotes.py:_SPLIT",
            "pipeline/core/instructions.py:_ROLE", "pipeline/core/instructions.py:_RULES[5][0]",
            "pipeline/research/extractive/sentences.py:_CUTS[0]", "ui/render.py:_URL"} <= ids
    # Inline patterns, by line: instructions.py searches r"\s" in a function; database.py tries two in turn.
    assert any(p.id.startswith("pipeline/core/instructions.py:") and p.pattern == r"\s" for p in patterns)
    assert sum(p.id.startswith("pipeline/store/database.py:") and p.id.endswith(("[0]", "[1]")) for p in patterns) == 2
    # Every module imported (ui/ ones without a running Streamlit). The only pattern the audit cannot read is
    # re.escape(term) between fixed lookarounds in grade.py: a literal, matched in linear time.
    assert [p for p in problems if not p.startswith("not a literal pattern: pipeline/bench/grade.py:")] == []


def test_importing_the_ui_modules_needs_no_streamlit_server_and_starts_nothing() -> None:
    # As the enumeration imports them, in a fresh interpreter: no error, no thread left running, no server.
    script = ("import pkgutil, importlib, threading, ui; "
              "names = [m.name for m in pkgutil.walk_packages(ui.__path__, 'ui.')]; "
              "[importlib.import_module(n) for n in names]; "
              "print(len(names), [t.name for t in threading.enumerate() if t is not threading.main_thread()])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    count, threads = done.stdout.split(" ", 1)
    assert int(count) >= 10 and threads.strip() == "[]"


def test_every_pattern_runs_in_linear_time_on_hostile_text(found: tuple[list[FoundPattern], list[str]]) -> None:
    timings = audit(found[0])
    worst = sorted(timings, key=lambda t: (t.seconds is not None, -(t.seconds or 0.0)))  # unfinished first
    print("worst per 10 KB input:\n" + "\n".join(f"  {_shown(t)}" for t in worst[:5]))
    assert [_shown(t) for t in timings if t.flagged()] == []


def test_the_audit_flags_backtracking_patterns() -> None:
    bad = [FoundPattern(name, pattern, 0) for name, pattern in KNOWN_BAD.items()]
    timings = audit(bad, deadline=BAD_DEADLINE)
    assert [t.id for t in timings if t.flagged()] == list(KNOWN_BAD), [_shown(t) for t in timings]


def test_the_audit_flags_quadratic_patterns_that_pass_the_bound_on_10_kb() -> None:
    bad = [FoundPattern(name, pattern, flags) for name, (pattern, flags) in QUADRATIC.items()]
    # At the audit's own size: at half of it the former _REF_DEF took 3.9 ms on an idle machine, under GROWTH_FLOOR,
    # so its growth went unmeasured and the check passed or failed with the machine's load.
    timings = {t.id: t for t in audit(bad)}
    assert [name for name, t in timings.items() if t.flagged()] == list(QUADRATIC), [
        _shown(t) for t in timings.values()]
    # Under the bound, flagged by its growth alone: about 16x (quadratic) at GROWTH_SCALE times the size.
    ref_def = timings["former _REF_DEF"]
    assert ref_def.seconds is not None and ref_def.seconds < BOUND and ref_def.growth is not None, _shown(ref_def)
    assert ref_def.growth > GROWTH_LIMIT > GROWTH_SCALE, _shown(ref_def)


def test_a_pattern_added_to_a_module_is_audited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "newpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rules.py").write_text(textwrap.dedent('''\
        import re

        _WORDS = re.compile(r"(\\w+\\s?)*$")
        _SAFE = (re.compile(r"\\w+"),)


        def trailing_as(text: str) -> bool:
            return re.search(r"(a|a)+$", text, re.I) is not None
    '''))
    inline, unresolved = inline_patterns([tmp_path], tmp_path)
    assert [(p.id, p.pattern, p.flags, p.calls) for p in inline if p.id == "newpkg/rules.py:8"] == [
        ("newpkg/rules.py:8", "(a|a)+$", 2, ("search",))] and unresolved == []
    monkeypatch.syspath_prepend(str(tmp_path))
    patterns, problems = all_patterns(tmp_path, ("newpkg",))
    assert sorted(p.id for p in patterns) == ["newpkg/rules.py:8", "newpkg/rules.py:_SAFE[0]",
                                             "newpkg/rules.py:_WORDS"] and problems == []
    timings = {t.id: t for t in audit(patterns, deadline=BAD_DEADLINE)}
    assert timings["newpkg/rules.py:_WORDS"].flagged() and timings["newpkg/rules.py:8"].flagged()
    assert not timings["newpkg/rules.py:_SAFE[0]"].flagged()


def _shown(t: Timing) -> str:
    seconds = "did not finish" if t.seconds is None else f"{t.seconds * 1000:.1f} ms"
    growth = "" if t.growth is None else f"; {t.growth:.1f}x at {GROWTH_SCALE}x the size, {t.growth_shape}"
    return f"{t.id}: {seconds} ({t.shape}; bound {BOUND:g} s{growth}; limit {GROWTH_LIMIT:g}x)"
