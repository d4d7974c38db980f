"""The four-ability suites: one spec per ability (abilities/<ability>.json) -> a small frozen web per question and a
suite file (benchmarks/suites/<ability>.json).

Called by build.py (`build.py abilities`). A spec question lists its pages as passages with a role; each becomes a
page of its own frozen web under `<ability>/<question id>/`, written as a short article with a site header,
navigation and footer (or as plain text when the passage says so), the way the corpus reader serves saved pages.
Standard library only, like build.py. The output is deterministic.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

ABILITIES = ("noise", "rejection", "integration", "counterfactual")
ROLES = {"gold", "part", "noise", "near_miss", "wrong"}
SPLITS = {"dev", "test"}
KIND = {"noise": "single_page", "rejection": "unanswerable", "integration": "two_page", "counterfactual": "conflict"}
SUITE_VERSION = "1"  # a spec's own "version" overrides it (bumped when its questions change)
_QID = re.compile(r"^[a-z]+-\d{2,3}$")


class SpecError(ValueError):
    """A spec that cannot be built; the message names the question and the field."""


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text.replace("\u201c", '"').replace("\u201d", '"'))
    return " ".join(text.replace("\u2013", "-").replace("\u2014", "-").lower().split())


def _holds(text: str, term: str) -> bool:
    t = _fold(term)
    return re.search(r"(?<![\w.])" + re.escape(t) + r"(?!\w|[.,]\d)", _fold(text)) is not None


def _groups(value: list) -> list[list[str]]:
    return [[g] if isinstance(g, str) else list(g) for g in value]


def _check(ability: str, q: dict) -> None:
    """Raise SpecError unless `q` is a well-formed question of `ability` whose pages carry what it expects."""
    qid = q.get("id", "?")
    where = f"{ability} question {qid!r}"
    if not _QID.match(str(qid)):
        raise SpecError(f"{where}: id must look like '{ability[:5]}-01'")
    if q.get("split") not in SPLITS:
        raise SpecError(f"{where}: split must be 'dev' or 'test'")
    pages = q.get("pages") or []
    if len(pages) < 2:
        raise SpecError(f"{where}: needs at least two pages")
    roles = [p.get("role") for p in pages]
    if not set(roles) <= ROLES:
        raise SpecError(f"{where}: unknown role in {roles}")
    urls = [p.get("url", "") for p in pages]
    if len(set(urls)) != len(urls) or not all(re.match(r"https?://[^/\s]+/", u) for u in urls):
        raise SpecError(f"{where}: every page needs its own absolute http(s) URL with a path")
    answers = _groups(q.get("answer_terms", []))
    texts = {p["url"]: " ".join([p.get("title", "")] + p.get("paragraphs", [])) for p in pages}
    answering = [p for p in pages if p["role"] in ("gold", "part")]
    if ability == "rejection":
        if answers or answering:
            raise SpecError(f"{where}: a rejection question has no answer_terms and no gold or part page")
        if not q.get("absent_terms"):
            raise SpecError(f"{where}: list absent_terms (what an answer would have to say), so the build can check "
                            "that no page says it")
        for term in q["absent_terms"]:
            holders = [u for u, t in texts.items() if _holds(t, term)]
            if holders:
                raise SpecError(f"{where}: absent term {term!r} is on {holders}")
        return
    if not answers or not answering:
        raise SpecError(f"{where}: needs answer_terms and at least one gold or part page")
    for group in answers:
        if not any(_holds(texts[p["url"]], t) for p in answering for t in group):
            raise SpecError(f"{where}: no gold or part page carries any of {group}")
    if ability == "integration" and (len(answers) < 2 or sum(r == "part" for r in roles) < 2):
        raise SpecError(f"{where}: integration needs two or more answer groups on two or more part pages")
    if ability == "counterfactual":
        wrong = _groups(q.get("wrong_answers", []))
        wrong_pages = [p for p in pages if p["role"] == "wrong"]
        if not wrong or not wrong_pages:
            raise SpecError(f"{where}: counterfactual needs wrong_answers and a page with role 'wrong'")
        for group in wrong:
            if not any(_holds(texts[p["url"]], t) for p in wrong_pages for t in group):
                raise SpecError(f"{where}: no wrong page carries any of {group}")


def _site(url: str) -> str:
    host = urlsplit(url).hostname or "site"
    return host.removeprefix("www.")


def page_html(page: dict) -> str:
    """A saved article: site header and navigation, the title, a date line, the paragraphs, a footer."""
    site = html.escape(_site(page["url"]))
    title = html.escape(page["title"])
    date = page.get("published")
    paragraphs = "\n".join(f"    <p>{html.escape(p)}</p>" for p in page["paragraphs"])
    dateline = f'\n    <p class="dateline"><time datetime="{date}">{date}</time></p>' if date else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title} | {site}</title></head>
<body>
  <header><a href="/">{site}</a>
    <nav><a href="/news">News</a> <a href="/business">Business</a> <a href="/sport">Sport</a>
      <a href="/about">About</a></nav>
  </header>
  <main><article>
    <h1>{title}</h1>{dateline}
{paragraphs}
  </article></main>
  <footer><p>&copy; {site}. All rights reserved.</p>
    <a href="/privacy">Privacy</a> <a href="/contact">Contact</a></footer>
</body>
</html>
"""


def page_text(page: dict) -> str:
    return page["title"] + "\n\n" + "\n\n".join(page["paragraphs"]) + "\n"


def _suite_question(ability: str, q: dict) -> dict:
    out: dict = {"id": q["id"], "split": q["split"], "question": q["question"], "kind": q.get("kind") or KIND[ability],
                 "corpus": f"{ability}/{q['id']}",
                 "gold_pages": [p["url"] for p in q["pages"] if p["role"] in ("gold", "part")]}
    if ability == "rejection":
        out.update(expect_gap=True, expect_nothing_stated=True)
    else:
        out["answer_terms"] = q["answer_terms"]
    if ability == "counterfactual":
        right = [g if isinstance(g, str) else g[0] for g in q["answer_terms"]][:1]
        wrong = [g if isinstance(g, str) else g[0] for g in q["wrong_answers"]][:1]
        out.update(expect_conflict=right + wrong, wrong_answers=q["wrong_answers"])
    if q.get("note"):
        out["note"] = q["note"]
    return out


README = """# `{ability}`: {n} questions, each on a small frozen web of its own

{description}

Built by `benchmarks/corpora/build.py abilities {ability}` from `../abilities/{ability}.json`, which holds every
page as passages with its role (`gold`, `part`, `noise`, `near_miss`, `wrong`) and its origin. Each question's web is
`<question id>/manifest.jsonl` with its pages under `pages/`; the suite is `benchmarks/suites/{ability}.json`.

Pages: {real} are verbatim excerpts of real news pages of the `news` corpus (Scrapinghub's article-extraction
benchmark, MIT, see `LICENSE`), under their real URLs, titles and dates; {written} were written for this project
(MIT), under reserved `.example` hosts (RFC 2606){wrong}. Facts in written pages may be invented: do not cite them.
"""


def _readme(spec: dict) -> str:
    pages = [p for q in spec["questions"] for p in q["pages"]]
    real = sum(1 for p in pages if not urlsplit(p["url"]).hostname.endswith(".example"))  # type: ignore[union-attr]
    wrong = sum(1 for p in pages if p["role"] == "wrong")
    return README.format(ability=spec["ability"], n=len(spec["questions"]), description=spec["description"],
                         real=real, written=len(pages) - real,
                         wrong=f"; the {wrong} `wrong` pages are such copies of a real passage with one fact changed"
                         if wrong else "")


def _spec(spec_path: Path) -> dict:
    """The checked spec at `spec_path`."""
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    if spec.get("ability") not in ABILITIES:
        raise SpecError(f"{spec_path}: ability must be one of {ABILITIES}")
    ids = [q.get("id") for q in spec["questions"]]
    if len(set(ids)) != len(ids):
        raise SpecError(f"{spec_path}: question ids repeat")
    for q in spec["questions"]:
        _check(spec["ability"], q)
    return spec


def _write_webs(questions: list[dict], root: Path) -> None:
    """Write each question's frozen web under `root`/<question id>/, replacing what was there."""
    for q in questions:
        if (root / q["id"]).exists():
            shutil.rmtree(root / q["id"])
        folder = root / q["id"]
        (folder / "pages").mkdir(parents=True)
        entries = []
        for n, page in enumerate(q["pages"], 1):
            plain = page.get("format") == "text"
            name = f"pages/{n:02d}.{'txt' if plain else 'html'}"
            (folder / name).write_text(page_text(page) if plain else page_html(page), encoding="utf-8")
            entry = {"url": page["url"], "path": name,
                     "content_type": "text/plain; charset=utf-8" if plain else "text/html; charset=utf-8",
                     "title": page["title"]}
            if page.get("published"):
                entry["published"] = page["published"]
            entries.append(json.dumps(entry, ensure_ascii=False))
        (folder / "manifest.jsonl").write_text("".join(f"{e}\n" for e in entries), encoding="utf-8")


def _write_suite(suite: dict, suites: Path) -> None:
    (suites / f"{suite['name']}.json").write_text(json.dumps(suite, indent=1, ensure_ascii=False) + "\n",
                                                  encoding="utf-8")


def build_ability(spec_path: Path, corpora: Path, suites: Path) -> int:
    """Write the frozen webs and the suite of one ability spec; the number of questions."""
    spec = _spec(spec_path)
    ability, questions = spec["ability"], spec["questions"]
    root = corpora / ability
    if root.exists():
        shutil.rmtree(root)
    _write_webs(questions, root)
    (root / "README.md").write_text(_readme(spec), encoding="utf-8")
    shutil.copyfile(corpora / "news" / "LICENSE", root / "LICENSE")
    _write_suite({"name": ability, "version": str(spec.get("version", SUITE_VERSION)),
                  "corpus": f"{ability}/{questions[0]['id']}", "description": spec["description"],
                  "questions": [_suite_question(ability, q) for q in questions]}, suites)
    return len(questions)


BLIND = ("Short questions of the four abilities in the public RGB benchmark's shape, written, with every page of their "
         "frozen webs, by a helper that had not read the selector's code, so that tuning has questions no one here "
         "wrote to the code's measure. The events are invented. All questions are dev: they were read while tuning.")
BLIND_LICENSE = ("Every page under this folder was written for this project (fictional events, reserved .example "
                 "hosts, RFC 2606) and is under the project's MIT licence (pyproject.toml). Do not cite them.\n")


def build_blind(specs: Path, corpora: Path, suites: Path) -> int:
    """Write suites/blind.json and its webs under corpora/blind/<question id>/ from specs/<ability>.json; the number
    of questions."""
    if (corpora / "blind").exists():
        shutil.rmtree(corpora / "blind")
    questions = []
    for ability in ABILITIES:
        spec = _spec(specs / f"{ability}.json")
        _write_webs(spec["questions"], corpora / "blind")
        for q in spec["questions"]:
            out = _suite_question(ability, q)
            out.update(id=f"blind-{q['id']}", corpus=f"blind/{q['id']}")
            questions.append(out)
    (corpora / "blind" / "LICENSE").write_text(BLIND_LICENSE, encoding="utf-8")
    (corpora / "blind" / "README.md").write_text(
        f"# `blind`: {len(questions)} questions, each on a small frozen web of its own\n\n{BLIND}\n\nBuilt by "
        "`benchmarks/corpora/build.py blind` from `../blind-specs/<ability>.json`; each question's web is "
        "`<question id>/`; the suite is `benchmarks/suites/blind.json`.\n", encoding="utf-8")
    _write_suite({"name": "blind", "version": "1", "corpus": questions[0]["corpus"], "description": BLIND,
                  "questions": questions}, suites)
    return len(questions)


BRIEF = ("The four abilities asked briefly, as people type into a search box (six to eighteen words, RGB's shape): "
         "each question is the short form of one question of the noise, rejection, integration or counterfactual "
         "suite, on that question's frozen web, with the same answer, split and expectations.")


def build_brief(specs: Path, suites: Path) -> int:
    """Write suites/brief.json from the `brief` phrasing of every question of every ability spec; the number."""
    questions = []
    for ability in ABILITIES:
        for q in json.loads((specs / f"{ability}.json").read_text(encoding="utf-8"))["questions"]:
            brief = q.get("brief")
            if not isinstance(brief, str) or not 6 <= len(brief.split()) <= 18 or not brief.endswith("?"):
                raise SpecError(f"{ability} question {q.get('id')!r}: brief must be a question of 6 to 18 words")
            out = _suite_question(ability, q)
            out.update(id=f"brief-{q['id']}", question=brief,
                       note=f"The brief form of {q['id']}. {out.get('note', '')}".strip())
            questions.append(out)
    _write_suite({"name": "brief", "version": "1", "corpus": questions[0]["corpus"], "description": BRIEF,
                  "questions": questions}, suites)
    return len(questions)
