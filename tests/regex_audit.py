"""Regex audit: every pattern pipeline/ and ui/ match text with, and its worst time on hostile text built from it.

Enumeration: module_patterns() imports every module of the packages and collects the compiled patterns they hold at
module level (by name, inside tuples, lists, sets, dicts, dataclass constants and class attributes);
inline_patterns() reads the source with `ast` for the patterns written in calls (`re.compile("...")`,
`re.search(r"...", x)`, ...), so a pattern added anywhere is audited without being listed. Each has a stable id:
"pipeline/core/quotes.py:_PLAIN" (a module name), "pipeline/core/instructions.py:_RULES[5][0]" (inside a constant)
or "pipeline/core/instructions.py:96" (a call, by line).

Hostile text: hostile_inputs() parses a pattern with re._parser and builds ~10 KB strings from its own pieces: each
repetition's body repeated, cut off by a character the pattern does not expect; whole near-matches repeated; its
literals and class samples repeated and alternated; and generic shapes (one character, "the the ...", ellipses,
whitespace runs). audit() times on each the calls the code makes with the pattern (search, match, fullmatch, or
finditer for the scanning ones: findall, sub, split), in child processes, so a pattern that never returns is killed
at a wall deadline and reported ("did not finish") while the rest go on. A call that is not fast (GROWTH_FLOOR) is
timed again on the same shape at 4x the size: a quadratic pattern with a small constant stays under the bound at
10 KB, but grows 16x where a linear one grows 4x.

Run as a script, the module is that child: it reads jobs as JSON on stdin and prints one JSON list a line:
["start", id], ["worst", id, seconds, shape] at each new worst, ["done", id, seconds, shape, growth, growth's shape]
or ["error", id, message].
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import itertools
import json
import os
import pkgutil
import queue
import random
import re
import re._constants as sre_constants  # type: ignore[import-not-found]  # re's parser has no stubs
import re._parser as sre_parse  # type: ignore[import-not-found]
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "ui")
SIZE = 10_000  # characters of each hostile input
BOUND = 1.0  # CPU seconds one call may take on one input; a linear pattern takes milliseconds
DEADLINE = 10.0  # wall seconds a pattern may take in all; past it the child is killed and the pattern fails
# A quadratic pattern with a small constant stays under BOUND at SIZE (the former `\s*```$` took 0.3 s on 10 KB, and
# would take an hour on 1 MB), so each input that took GROWTH_FLOOR or more is timed again at GROWTH_SCALE times its
# size: linear work grows about 4x, quadratic 16x. Past GROWTH_LIMIT the pattern fails.
GROWTH_FLOOR = 0.005  # CPU seconds; below it the clock and the machine's load decide the ratio
GROWTH_SCALE = 4
GROWTH_LIMIT = 10.0  # between linear (4x) and quadratic (16x)

# Modules that are not imported: page scripts draw a Streamlit page when imported, and `__main__` runs a command.
# Their patterns are still read from the source by inline_patterns().
_NOT_IMPORTED = re.compile(r"(?:^|\.)__main__$|^ui\.pages(?:\.|$)")

# Characters tried against each character class: ASCII letters and digits (a sample), all ASCII punctuation, other
# whitespace, and letters, punctuation and symbols of the scripts pages are written in.
_UNIVERSE = ("abcxyzAZ_0159" + "!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~" + " \t\n\r\x0b\x0c"
             + "\x00\x7f\x85\xa0\xad\u2003\u2028\u200b\u00e9\u00df\u00c0\u00ff\u0430\u4e00\uac00"
             + "\u2026\u2014\u2013\u2010\u2018\u2019\u201c\u201d\u00ab\u00bb\u3002\uff01\u300d\u2603\U0001f600")
# Characters that end a near-match: the first few a pattern does not expect at that place are used.
_ENDERS = ("\x00", "!", "\u2603", "x", " ", "\n", "0")
_GENERIC = (" ", "a", ".", "-", "\n", "the ", "... ", "\u2026 ", "a ", "a.", "1,", "A. ", "\t \n \r\n  ", "'", "<")
_MAX_VARIANTS = 3  # examples of a piece of a pattern
_MAX_FILLS = 16  # ways through a repetition's body that are each filled
_MAX_ATOMS = 8  # literal runs and class samples each repeated (the first five also alternated in pairs)
_MAX_PREFIXES = 12  # prefixes of a shortest match each repeated
_GAPS = ("\n", " ")  # between the shortest prefixes, repeated


CALLS: tuple[str, ...] = ("search", "match", "fullmatch", "finditer")  # the calls timed


@dataclass(frozen=True)
class FoundPattern:
    """One pattern as written in the code: where (id), the pattern, its flags, and the calls the code makes with it
    (of CALLS; all of them when the code passes the pattern around)."""

    id: str
    pattern: str | bytes
    flags: int
    calls: tuple[str, ...] = CALLS

# A method of re or of a compiled pattern -> the call timed for it: the scanning ones all search every position.
_CALL_OF = {"search": "search", "match": "match", "fullmatch": "fullmatch", "findall": "finditer",
            "finditer": "finditer", "split": "finditer", "sub": "finditer", "subn": "finditer"}
_FLAGS_AT = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3,
             "sub": 4, "subn": 4}  # re.<function> -> position of its flags argument
_FLAG_NAMES = {name for name in dir(re) if isinstance(getattr(re, name), re.RegexFlag)}
_NOT_APPLIED = {"pattern", "flags", "groups", "groupindex"}  # attributes read without matching any text


@dataclass(frozen=True)
class Timing:
    """A pattern's audit: the worst CPU seconds of one call on one input (None: it did not finish), and on what."""

    id: str
    seconds: float | None
    shape: str
    growth: float | None = None  # the worst time ratio at GROWTH_SCALE times the size (None: nothing was slow enough)
    growth_shape: str = ""

    def flagged(self, bound: float = BOUND, limit: float = GROWTH_LIMIT) -> bool:
        """Whether the pattern is not linear enough: it did not finish, one call took longer than `bound`, or a slow
        call grew more than `limit` times at GROWTH_SCALE times the input."""
        return self.seconds is None or self.seconds > bound or (self.growth is not None and self.growth > limit)


# --- enumeration ---------------------------------------------------------------------------------------------------


def all_patterns(root: Path = ROOT, packages: Sequence[str] = PACKAGES) -> tuple[list[FoundPattern], list[str]]:
    """Every pattern of `packages` (module-level ones first, then inline calls that are not one of them), and the
    problems met (modules that failed to import, calls in functions whose pattern is not a literal)."""
    modules, failed = module_patterns(packages, root)
    inline, unresolved = inline_patterns([root / p for p in packages], root)
    known = {(p.id.rsplit(":", 1)[0], p.pattern, p.flags) for p in modules}
    extra = [p for p in inline if (p.id.rsplit(":", 1)[0], p.pattern, _compiled_flags(p)) not in known]
    return modules + extra, failed + [f"not a literal pattern: {u}" for u in unresolved]


def module_patterns(packages: Sequence[str] = PACKAGES, root: Path = ROOT) -> tuple[list[FoundPattern], list[str]]:
    """The compiled patterns every module of `packages` holds at module level, and the modules that failed to
    import (as "name: error")."""
    sources = _Sources([root / p for p in packages], root)
    found: list[FoundPattern] = []
    failed: list[str] = []
    for name in _module_names(packages, failed):
        try:
            module = importlib.import_module(name)
        except Exception as e:  # reported, never skipped: a module the audit cannot import is not audited
            failed.append(f"{name}: {e!r}")
            continue
        found += _patterns_of(module, sources)
    return found, failed


def _module_names(packages: Sequence[str], failed: list[str]) -> Iterator[str]:
    for package in packages:
        top = importlib.import_module(package)
        yield package
        for info in pkgutil.walk_packages(top.__path__, f"{package}.", onerror=failed.append):
            if not _NOT_IMPORTED.search(info.name):
                yield info.name


class _Sources:
    """The parsed .py files under some folders: what each module binds at top level, what it imports, and which
    methods it calls on each name."""

    def __init__(self, dirs: Sequence[Path], root: Path) -> None:
        self.root = root
        self.trees: dict[str, ast.Module] = {}  # module name -> tree
        for path in sorted(p for d in dirs for p in d.rglob("*.py")):
            parts = path.resolve().relative_to(root.resolve()).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            self.trees[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        self._uses = {module: _name_uses(tree) for module, tree in self.trees.items()}
        self._imports = {module: _imports(module, tree) for module, tree in self.trees.items()}

    def calls(self, module: str, name: str) -> tuple[str, ...]:
        """The calls made with module.name in its own module and where it is imported; all CALLS when it is also
        used some other way (passed on, put in a container) or not called at all."""
        local_names = [(module, name)] + [(other, local) for other, imports in self._imports.items()
                                          for local, source in imports.items() if source == (module, name)]
        methods: set[str] = set()
        for where, local in local_names:
            uses = self._uses.get(where, {}).get(local, set())
            if uses is None:
                return CALLS
            methods |= uses
        calls = tuple(c for c in CALLS if c in {_CALL_OF[m] for m in methods})
        return calls or CALLS


def _name_uses(tree: ast.Module) -> dict[str, set[str] | None]:
    """Per name read in the tree: the pattern methods called on it, or None when it is also read another way."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    uses: dict[str, set[str] | None] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
            continue
        parent = parents.get(node)
        method = parent.attr if isinstance(parent, ast.Attribute) else None
        if method in _NOT_APPLIED:
            continue
        call = parents.get(parent) if parent is not None else None
        known = uses.setdefault(node.id, set())
        if known is not None and method in _CALL_OF and isinstance(call, ast.Call) and call.func is parent:
            known.add(str(method))
        else:
            uses[node.id] = None
    return uses


def _imports(module: str, tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Local name -> (module, name) for each `from module import name [as local]` (relative ones resolved)."""
    package = module.split(".")
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                # A module's package is its name without the last part (a package's own __init__ aside).
                anchor = package[:len(package) - node.level]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                out[alias.asname or alias.name] = (base, alias.name)
    return out


def _patterns_of(module: ModuleType, sources: _Sources) -> list[FoundPattern]:
    """The patterns bound by the module's own top-level names (imported names are found in their own module)."""
    tree = sources.trees.get(module.__name__)
    if tree is None:
        return []
    own = _assigned_names(tree)
    where = Path(module.__file__ or "").resolve().relative_to(sources.root.resolve()).as_posix()
    found: list[FoundPattern] = []
    seen: set[int] = set()
    for name, value in vars(module).items():
        if name in own:
            calls = sources.calls(module.__name__, name) if isinstance(value, re.Pattern) else CALLS
            found += _walk(value, f"{where}:{name}", seen, 0, calls)
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in vars(value).items():
                if not attr.startswith("__"):
                    found += _walk(member, f"{where}:{name}.{attr}", seen, 1, CALLS)
    return found


def _assigned_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        for target in targets:
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _walk(value: object, label: str, seen: set[int], depth: int, calls: tuple[str, ...]) -> list[FoundPattern]:
    """Patterns in `value`: itself, or inside a container or dataclass instance (a few levels deep)."""
    if isinstance(value, re.Pattern):
        if id(value) in seen:
            return []
        seen.add(id(value))
        return [FoundPattern(label, value.pattern, value.flags, calls)]
    if depth >= 4 or id(value) in seen:
        return []
    items: Iterable[tuple[str, object]]
    if isinstance(value, tuple | list):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        items = ((f"[{'_'.join(repr(k).split())}]", v) for k, v in value.items())  # ids hold no spaces
    elif isinstance(value, set | frozenset):
        items = ((f"[{i}]", v) for i, v in enumerate(sorted(value, key=repr)))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f".{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value))
    else:
        return []
    seen.add(id(value))
    return [p for suffix, v in items for p in _walk(v, label + suffix, seen, depth + 1, CALLS)]


def inline_patterns(dirs: Sequence[Path], root: Path = ROOT) -> tuple[list[FoundPattern], list[str]]:
    """The patterns written as literals in re.* calls in the .py files under `dirs` (ids "file:line"), and the
    calls in functions whose pattern is not a literal ("file:line"). A module-level call's pattern is also held by
    a module-level name, which module_patterns() finds."""
    found: list[FoundPattern] = []
    unresolved: list[str] = []
    for path in sorted(p for d in dirs for p in d.rglob("*.py")):
        where = path.resolve().relative_to(root.resolve()).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        loop_values = _loop_literals(tree)
        functions = (f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))
        in_function = {id(n) for f in functions for n in ast.walk(f)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or (call := _re_call(node)) is None:
                continue
            function, pattern_arg, flags_arg = call
            patterns = _literal(pattern_arg)
            if patterns is None and isinstance(pattern_arg, ast.Name):
                patterns = loop_values.get(pattern_arg.id)
            if patterns is None:
                if id(node) in in_function:
                    unresolved.append(f"{where}:{node.lineno}")
                continue
            calls = CALLS if function == "compile" else (_CALL_OF[function],)
            ids = [f"{where}:{node.lineno}"] if len(patterns) == 1 else [
                f"{where}:{node.lineno}[{i}]" for i in range(len(patterns))]  # one call trying patterns in turn
            found += [FoundPattern(i, p, _flags(flags_arg), calls) for i, p in zip(ids, patterns, strict=True)]
    return found, unresolved


def _re_call(node: ast.Call) -> tuple[str, ast.expr, ast.expr | None] | None:
    """(function, pattern argument, flags argument) of a call re.<function>(...), else None."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in _FLAGS_AT:
        return None
    if not isinstance(func.value, ast.Name) or func.value.id != "re":
        return None
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    pattern = node.args[0] if node.args else keywords.get("pattern")
    if pattern is None:
        return None
    at = _FLAGS_AT[func.attr]
    return func.attr, pattern, node.args[at] if len(node.args) > at else keywords.get("flags")


def _literal(node: ast.expr) -> list[str | bytes] | None:
    """The value of a string or bytes literal (also "a" "b" and "a" + "b"), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        return [node.value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        if left and right and type(left[0]) is type(right[0]):
            return [left[0] + right[0]]  # type: ignore[operator]
    return None


def _loop_literals(tree: ast.Module) -> dict[str, list[str | bytes]]:
    """Names bound by `for name in ("literal", ...)`: a pattern tried in turn from a tuple of literals."""
    bound: dict[str, list[str | bytes]] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.For) and isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.Tuple | ast.List)):
            values = [_literal(e) for e in node.iter.elts]
            if values and all(values):
                bound.setdefault(node.target.id, []).extend(v[0] for v in values if v)
    return bound


def _flags(node: ast.expr | None) -> int:
    """The value of a literal flags argument (re.I | re.S, re.IGNORECASE, 0); 0 when absent or not literal."""
    if node is None:
        return 0
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re"
            and node.attr in _FLAG_NAMES):
        return int(getattr(re, node.attr))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    return 0


def _compiled_flags(p: FoundPattern) -> int:
    try:
        return re.compile(p.pattern, p.flags).flags
    except re.error:
        return p.flags


# --- hostile inputs from a pattern's structure --------------------------------------------------------------------

_Item = tuple[Any, Any]  # (opcode, argument) of re._parser's tree


class _Shapes:
    """Reads one parsed pattern: its literals, samples of its character classes, and texts that exercise it."""

    def __init__(self, pattern: str | bytes, flags: int, size: int) -> None:
        self.size = size
        self.flags = re.compile(pattern, flags).flags
        self.is_bytes = isinstance(pattern, bytes)
        self.tree = sre_parse.parse(pattern, flags)
        self.atoms: list[str] = []  # literal runs and class samples, in pattern order
        self.accepted: set[str] = set()  # characters some single-character piece of the pattern accepts
        self.repeats: list[_Item] = []
        self._expand: int | None = None  # the repeat (by position in self.repeats) filled to `size`
        self._count = 0
        self._width = _MAX_VARIANTS  # how many examples a piece yields
        self._minimal = False  # whether each repeat is taken its least number of times (an optional part left out)
        self._scan(list(self.tree))

    # reading the tree

    def _scan(self, items: list[_Item]) -> None:
        run = ""
        for op, av in items:
            if op is sre_constants.LITERAL:
                run += chr(av)
                self.accepted.add(chr(av))
                continue
            if len(run) > 1:
                self._atom(run)
            run = ""
            if op is sre_constants.IN:
                for c in self._members(av):
                    self._atom(c)
            elif op is sre_constants.ANY:
                self.accepted |= set(_UNIVERSE) - ({"\n"} if not self.flags & re.S else set())
            elif op is sre_constants.NOT_LITERAL:
                self.accepted |= set(_UNIVERSE) - {chr(av)}
            elif op is sre_constants.BRANCH:
                for alternative in av[1]:
                    self._scan(list(alternative))
            elif op in _REPEATS:
                self.repeats.append((op, av))
                self._scan(list(av[2]))
            elif op is sre_constants.ATOMIC_GROUP:
                self._scan(list(av))
            elif op in (sre_constants.SUBPATTERN, sre_constants.ASSERT, sre_constants.ASSERT_NOT):
                self._scan(list(av[-1]))
            elif op is sre_constants.GROUPREF_EXISTS:
                self._scan(list(av[1]))
                if av[2] is not None:
                    self._scan(list(av[2]))
        if len(run) > 1:
            self._atom(run)

    def _atom(self, atom: str) -> None:
        if atom not in self.atoms:
            self.atoms.append(atom)

    def _members(self, items: list[_Item]) -> list[str]:
        """Up to three characters the class accepts (explicit ones first, then one of each kind), all accepted
        ones noted."""
        matcher = self._class_matcher(items)
        explicit = [chr(av) for op, av in items if op is sre_constants.LITERAL]
        explicit += [chr(c) for op, av in items if op is sre_constants.RANGE for c in (av[0], (av[0] + av[1]) // 2)]
        members = [c for c in dict.fromkeys(explicit + list(_UNIVERSE)) if matcher(c)]
        self.accepted |= set(members)
        picked: list[str] = []
        for kind in (lambda c: c in explicit, str.isalpha, str.isdigit, str.isspace, lambda c: not c.isascii(),
                     lambda c: True):
            c = next((c for c in members if kind(c) and c not in picked), None)
            if c is not None and len(picked) < _MAX_VARIANTS:
                picked.append(c)
        return picked

    def _class_matcher(self, items: list[_Item]) -> Callable[[str], bool]:
        parts: list[str] = []
        for op, av in items:
            if op is sre_constants.NEGATE:
                parts.insert(0, "^")
            elif op is sre_constants.LITERAL:
                parts.append(_escape(av))
            elif op is sre_constants.RANGE:
                parts.append(f"{_escape(av[0])}-{_escape(av[1])}")
            elif op is sre_constants.CATEGORY:
                parts.append(_CATEGORIES.get(av, ""))
        source = "[" + "".join(parts) + "]"
        flags = self.flags & (re.I | re.A)
        if self.is_bytes:
            compiled_b = re.compile(source.encode("latin-1"), flags)
            return lambda c: ord(c) < 256 and compiled_b.fullmatch(c.encode("latin-1")) is not None
        compiled = re.compile(source, flags)
        return lambda c: compiled.fullmatch(c) is not None

    # texts that match or nearly match

    def examples(self, items: list[_Item] | None = None) -> list[str]:
        """A few texts the (sub)pattern matches; the repeat being expanded is filled to `size` characters."""
        variants: list[list[str]] = []
        seq = list(self.tree) if items is None else items
        for index, (op, av) in enumerate(seq):
            variants.append(self._node(op, av, last=index == len(seq) - 1))
        width = min(self._width, max((len(v) for v in variants), default=1))
        return list(dict.fromkeys("".join(v[i % len(v)] for v in variants if v) for i in range(width)))

    def _node(self, op: Any, av: Any, *, last: bool) -> list[str]:
        if op is sre_constants.LITERAL:
            return [chr(av)]
        if op is sre_constants.NOT_LITERAL:
            return [next(c for c in "ax " if c != chr(av))]
        if op is sre_constants.ANY:
            return ["a"]
        if op is sre_constants.IN:
            return self._members(av) or ["a"]
        if op is sre_constants.BRANCH:
            firsts = [e for alt in av[1] for e in self.examples(list(alt))[:1]]
            firsts.sort(key=lambda e: _OPEN not in e)  # the alternative holding the filled repeat is kept
            return list(dict.fromkeys(firsts))[:_MAX_FILLS]
        if op in _REPEATS:
            return self._repeat(av)
        if op is sre_constants.ATOMIC_GROUP:
            return self.examples(list(av))
        if op is sre_constants.SUBPATTERN:
            return self.examples(list(av[-1]))
        # Lookarounds and the other branch of (?(1)..|..) are walked too, so repeats keep their numbers.
        if op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            inside = self.examples(list(av[1]))
            return inside if op is sre_constants.ASSERT and av[0] == 1 and last else [""]
        if op is sre_constants.GROUPREF_EXISTS:
            yes = self.examples(list(av[1]))
            if av[2] is not None:
                self.examples(list(av[2]))
            return yes
        return [""]  # anchors, back references

    def _repeat(self, av: Any) -> list[str]:
        low, high, body = av
        index = self._count
        self._count += 1
        bodies = self.examples(list(body)) or [""]
        if index == self._expand:
            # Each way through the body repeated, and the first two alternated: a backtracking pattern may fail
            # on one of them only ("Ab II II ... II x" where "II" is read two ways).
            fills = []
            for unit in [b for b in bodies if b] + ["".join(bodies[:2])] if len(bodies) > 1 else bodies or ["a"]:
                times = max(low, 1, self.size // max(1, len(unit)))
                fills.append(_OPEN + unit * (times if high == sre_constants.MAXREPEAT else min(times, high)) + _CLOSE)
            return list(dict.fromkeys(fills))
        times = low if self._minimal else max(low, 1) if high >= 1 else 0
        return [b * times for b in bodies]

    def minimal_examples(self) -> list[str]:
        """A few shortest texts the pattern matches, each repeat taken its least number of times ("[a](a)" for the
        Markdown link pattern of defang.py): their prefixes are the near-matches a scan tries from each start."""
        self._minimal = True
        try:
            return self.examples()
        finally:
            self._minimal = False

    def expanded(self, index: int) -> list[tuple[str, str, str]]:
        """Texts with repeat `index` filled: (what comes before, the filled repeat, what follows), per example."""
        self._expand, self._count, self._width = index, 0, _MAX_FILLS
        try:
            filled = self.examples()
        finally:
            self._expand, self._count, self._width = None, 0, _MAX_VARIANTS
        out = []
        for text in filled:
            if text.count(_OPEN) == 1:
                head, rest = text.split(_OPEN)
                body, tail = rest.split(_CLOSE)
                out.append((head, body, tail))
        return out

    def enders(self) -> list[str]:
        """Two characters that cut a near-match short: ones no single-character piece of the pattern accepts."""
        free = [c for c in _ENDERS if c not in self.accepted]
        return (free + [c for c in _ENDERS if c not in free])[:2]


_OPEN, _CLOSE = "\ue000", "\ue001"  # around the filled repeat in an example, taken out before use
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT)
_CATEGORIES = {
    sre_constants.CATEGORY_DIGIT: r"\d", sre_constants.CATEGORY_NOT_DIGIT: r"\D",
    sre_constants.CATEGORY_SPACE: r"\s", sre_constants.CATEGORY_NOT_SPACE: r"\S",
    sre_constants.CATEGORY_WORD: r"\w", sre_constants.CATEGORY_NOT_WORD: r"\W",
}


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _fill(unit: str, size: int) -> str:
    return unit * max(1, size // max(1, len(unit)))


def hostile_inputs(pattern: str | bytes, flags: int = 0, size: int = SIZE) -> list[tuple[str, str]]:
    """(description, text) pairs of about `size` characters built from the pattern's own structure, then the
    generic hostile shapes; each text at most once."""
    shapes = _Shapes(pattern, flags, size)
    enders = shapes.enders()
    out: list[tuple[str, str]] = []
    for index in range(len(shapes.repeats)):
        low, high, _ = shapes.repeats[index][1]
        if high != sre_constants.MAXREPEAT and high < 100:
            continue  # a short repeat: the unbounded ones around it are filled instead
        for n, (head, filled, tail) in enumerate(shapes.expanded(index)):
            unit = filled[:12]
            for end in enders if n < 2 else enders[:1]:
                out.append((f"repeat {index} ({unit!r}...) then {end!r}", head + filled + end))
                if n < 2:
                    out.append((f"repeat {index} ({unit!r}...) alone then {end!r}", filled + end))
            if n < 2:
                out.append((f"repeat {index} ({unit!r}...) matching", head + filled + tail))
    for example in shapes.examples():
        for end in enders[:1]:
            if len(example) > 1:
                out.append((f"near-match {example[:-1][:20]!r} repeated then {end!r}", _fill(example[:-1], size) + end))
            out.append((f"match {example[:20]!r} repeated then {end!r}", _fill(example, size) + end))
    # Prefixes of a shortest match, repeated: each start reads on as far as the prefix goes, and a part that reads to
    # the end of the text ("[^)]*" after "[a](") makes each of them read to the end (quadratic).
    for example in shapes.minimal_examples():
        cuts = sorted({max(1, len(example) * i // _MAX_PREFIXES) for i in range(_MAX_PREFIXES)} | {len(example) - 1})
        for n, cut in enumerate(c for c in cuts if 0 < c < len(example)):
            prefix = example[:cut]
            out.append((f"prefix {prefix[:20]!r} repeated then {enders[0]!r}", _fill(prefix, size) + enders[0]))
            for gap in _GAPS if n < 3 else ():  # a prefix line after line ("[\n[\n..." for a pattern opening a line)
                out.append((f"prefix {prefix[:20]!r} and {gap!r} repeated", _fill(prefix + gap, size)))
    atoms = shapes.atoms[:_MAX_ATOMS]
    for atom in atoms:
        out.append((f"{atom[:20]!r} repeated then {enders[0]!r}", _fill(atom, size) + enders[0]))
    for i, a in enumerate(atoms[:5]):
        for b in atoms[i + 1:5]:
            out.append((f"{a[:10]!r}{b[:10]!r} alternated then {enders[0]!r}", _fill(a + b, size) + enders[0]))
    for unit in _GENERIC:
        out.append((f"{unit!r} repeated", _fill(unit, size)))
        out.append((f"{unit!r} repeated then 'x'", _fill(unit, size) + "x"))
    unique: dict[str, str] = {}
    for description, text in out:
        unique.setdefault(text, description)
    return [(description, text) for text, description in unique.items()]


# --- hostile pages, for the text functions that use these patterns ------------------------------------------------


def page_shapes(size: int) -> dict[str, str]:
    """Hostile page texts of `size` characters, by name: ellipses, one word repeated, mixed whitespace, one
    character."""
    def fill(unit: str) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    return {"ellipses \u2026": fill("\u2026 "), "ellipses ...": fill("... "), "repeated word": fill("the "),
            "whitespace": fill(" \n\t  \n\n\t \r\n "), "one letter": "a" * size, "one full stop": "." * size}


def near_miss(page: str) -> str:
    """A 300-character quote from the middle of `page` (from a word's start if there is a space) whose last character
    differs from the page's."""
    space = page.find(" ", len(page) // 2)
    start = space + 1 if space >= 0 else len(page) // 2
    quote = page[start:start + 300]
    return quote[:-1] + ("y" if quote.endswith("x") else "x")


def token_texts(tokens: Sequence[str], *, count: int = 2000, seed: int = 0) -> list[str]:
    """Texts made of `tokens`, to compare a rewritten pattern with its former form: every join of up to three, then
    `count` seeded random joins of 4 to 16, half of them with spaces between."""
    texts = ["".join(t) for n in range(4) for t in itertools.product(tokens, repeat=n)]
    rng = random.Random(seed)
    for i in range(count):
        words = [rng.choice(tokens) for _ in range(rng.randint(4, 16))]
        texts.append((" " if i % 2 else "").join(words))
    return texts


# --- timing in child processes ------------------------------------------------------------------------------------


def worst_time(pattern: str | bytes, flags: int, size: int = SIZE, bound: float = BOUND,
               calls: Sequence[str] = CALLS, report: Callable[[float, str], None] | None = None,
               ) -> tuple[float, str, float | None, str]:
    """The worst CPU seconds of one call (of `calls`: search, match, fullmatch, finditer) on one hostile input, and
    which; then the worst growth of the calls that took GROWTH_FLOOR or more, timed again on the same shape at
    GROWTH_SCALE times the size (None when none was that slow), and which. Stops at the first call over `bound`
    or growth over GROWTH_LIMIT (a call that takes 20x GROWTH_FLOOR has its growth measured at once, so that a
    quadratic pattern is not timed on every input); each new worst time is passed to `report`. Run it in a child
    process: a backtracking pattern may never return."""
    compiled = re.compile(pattern, flags)
    worst, shape = 0.0, "every call under the clock's resolution"
    growth: float | None = None
    growth_shape = ""
    slow: list[tuple[float, str, str, str]] = []  # (seconds, call, description, text) of the calls past GROWTH_FLOOR
    larger: dict[str, str] = {}  # description -> the input at GROWTH_SCALE times the size, made when first needed

    def grow(spent: float, call: str, description: str, text: str) -> None:
        nonlocal growth, growth_shape
        if not larger:
            for d, t in hostile_inputs(pattern, flags, size * GROWTH_SCALE):
                larger.setdefault(d, t)
        if description in larger:
            ratio = _ratio(compiled, call, text, spent, larger[description])
            if growth is None or ratio > growth:
                growth, growth_shape = ratio, f"{call} on {description} ({len(larger[description]):,} chars)"

    for description, text in hostile_inputs(pattern, flags, size):
        for call in calls:
            spent = _timed(compiled, call, text)
            if spent > worst:
                worst, shape = spent, f"{call} on {description} ({len(text):,} chars)"
                if report is not None:
                    report(worst, shape)
            if worst > bound:
                return worst, shape, None, ""
            if spent >= 20 * GROWTH_FLOOR:
                grow(spent, call, description, text)
                if growth is not None and growth > GROWTH_LIMIT:
                    return worst, shape, growth, growth_shape
            elif spent >= GROWTH_FLOOR:
                slow.append((spent, call, description, text))
    for spent, call, description, text in sorted(slow, key=lambda s: -s[0])[:4]:  # the slowest few
        grow(spent, call, description, text)
        if growth is not None and growth > GROWTH_LIMIT:
            break
    return worst, shape, growth, growth_shape


def _ratio(compiled: re.Pattern[Any], call: str, text: str, spent: float, larger: str) -> float:
    """How many times longer the call takes on `larger` than on `text` (which took `spent`): the least of two runs
    of each, so that a pause of the machine does not read as growth."""
    small = min(spent, _timed(compiled, call, text))
    big = _timed(compiled, call, larger)
    if big / max(small, 1e-9) > GROWTH_LIMIT and big < 2 * BOUND:  # a slower one is not a pause: not run again
        big = min(big, _timed(compiled, call, larger))
    return big / max(small, 1e-9)


def _timed(compiled: re.Pattern[Any], call: str, text: str) -> float:
    """CPU seconds of one call on `text` (encoded as Latin-1 for a bytes pattern)."""
    subject: str | bytes = text.encode("latin-1", "replace") if isinstance(compiled.pattern, bytes) else text
    t0 = time.process_time()
    if call == "finditer":
        for _ in compiled.finditer(subject):
            pass
    else:
        getattr(compiled, call)(subject)
    return time.process_time() - t0


def audit(patterns: Sequence[FoundPattern], *, size: int = SIZE, bound: float = BOUND, deadline: float = DEADLINE,
          workers: int = 2) -> list[Timing]:
    """Each pattern's worst time (in the order given), measured in `workers` child processes; a pattern that takes
    longer than `deadline` wall seconds is reported as not finished, and its child is killed and restarted at the
    next pattern."""
    chunks = [list(patterns[i::workers]) for i in range(workers)]
    results: list[list[Timing]] = [[] for _ in chunks]

    def supervise(i: int) -> None:
        while len(results[i]) < len(chunks[i]):
            results[i] += _run_child(chunks[i][len(results[i]):], size, bound, deadline)

    threads = [threading.Thread(target=supervise, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_id = {t.id: t for chunk in results for t in chunk}
    return [by_id[p.id] for p in patterns]


def _run_child(jobs: list[FoundPattern], size: int, bound: float, deadline: float) -> list[Timing]:
    """Timings from one child, up to the first pattern that did not finish (the child is then killed) or that made
    the child fail."""
    payload = json.dumps({"size": size, "bound": bound, "jobs": [
        {"id": j.id, "pattern": j.pattern.decode("latin-1") if isinstance(j.pattern, bytes) else j.pattern,
         "bytes": isinstance(j.pattern, bytes), "flags": j.flags, "calls": j.calls} for j in jobs]})
    lines: queue.Queue[str | None] = queue.Queue()
    out: list[Timing] = []
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=errors, text=True, encoding="utf-8",
                                 env={**os.environ, "PYTHONIOENCODING": "utf-8"})
        assert child.stdin is not None and child.stdout is not None
        stdout = child.stdout

        def read() -> None:
            for line in stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        child.stdin.write(payload)
        child.stdin.close()
        current, started, so_far = jobs[0].id, time.monotonic(), ""
        try:
            while len(out) < len(jobs):
                try:
                    line = lines.get(timeout=max(0.0, started + deadline - time.monotonic()))
                except queue.Empty:
                    out.append(Timing(current, None, f"did not finish in {deadline:g} s{so_far}"))
                    break
                if line is None:
                    child.wait()
                    errors.seek(0)
                    last = errors.read().decode("utf-8", "replace").strip().splitlines()[-1:]
                    out.append(Timing(current, None, f"child exited ({child.returncode}): {' '.join(last)}"))
                    break
                kind, ident, *rest = json.loads(line)
                if kind == "start":
                    current, started, so_far = ident, time.monotonic(), ""
                elif kind == "worst":
                    so_far = f" (worst call before: {rest[0]:.2f} s, {rest[1]})"
                elif kind == "done":
                    out.append(Timing(ident, *rest))
                elif kind == "error":
                    out.append(Timing(ident, None, f"error: {rest[0]}"))
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
            stdout.close()
    return out


def _child() -> None:
    """The child's loop: time each job read from stdin, printing ["start", id], ["worst", id, seconds, shape] at
    each new worst (for the report of a pattern that does not finish) and ["done", id, seconds, shape, growth,
    growth's shape], one JSON list a line."""
    def say(*fields: object) -> None:
        print(json.dumps(fields), flush=True)

    task = json.loads(sys.stdin.read())
    for job in task["jobs"]:
        ident = job["id"]
        say("start", ident)
        pattern = job["pattern"].encode("latin-1") if job["bytes"] else job["pattern"]

        def report(seconds: float, shape: str, ident: str = ident) -> None:
            say("worst", ident, seconds, shape)

        try:
            seconds, shape, growth, growth_shape = worst_time(pattern, job["flags"], task["size"], task["bound"],
                                                              job["calls"], report)
        except (re.error, RecursionError, ValueError) as e:
            say("error", ident, repr(e))
            continue
        say("done", ident, seconds, shape, growth, growth_shape)


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        _child()
