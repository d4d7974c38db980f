"""Words as search terms: tokenize(text) -> [(term, start, end)]; content_terms(text) -> lowercased content words."""
from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

import Stemmer

# A token: a number with its inner separators ("3.5", "1,200", "2019-20" stays two), a dotted acronym ("U.S.",
# "e.g."), or a run of letters/digits with inner apostrophes ("don't", "O'Brien"). Unicode letters count.
# Combining marks (accents typed separately, Indic vowel signs...) are not \w in Python's re; they belong to words.
_MARKS = ("\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
          "\u0900-\u0963\u0966-\u0dff\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u1ab0-\u1aff\u1dc0-\u1dff"
          "\u20d0-\u20ff\ufe20-\ufe2f")
# Taken whole (`++`, `*+`): some characters are both letters and marks here, and a run read either way per
# character has exponentially many readings to retry. Digits likewise (`\d++`): a digit given back is still a digit.
_LETTERS = rf"(?:[^\W_]|[{_MARKS}])++"
_TOKEN = re.compile(
    r"\d++(?:[.,]\d++)*(?![^\W_])"
    r"|(?:[^\W\d_]\.){2,}"
    rf"|{_LETTERS}(?:['\u2019]{_LETTERS})*+"
)
_ACRONYM = re.compile(r"(?:[^\W\d_]\.){2,}")
# Stop words that, in capitals, are names: "US", "IT", "WHO", "AM"/"PM" (but "THE" in a headline stays a stop word).
_CAPITAL_NAMES = frozenset(["us", "it", "who", "am", "pm", "no", "un", "eu"])


def word_list(text: str) -> list[str]:
    """The words of a word list written as one string (easier to read and edit than a list of literals)."""
    return text.split()


STOP_WORDS = frozenset(word_list("""
    a about above after again against all almost also although am among an and any are aren't around as
    at be became because been before being below between both but by can can't cannot could couldn't did
    didn't do does doesn't doing don't done down during each either else ever every few for from further
    get gets got had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's its itself
    just let's like made make many may me might more most much must mustn't my myself need neither no
    nor not now of off often on once one only or other ought our ours ourselves out over own per please
    quite rather really said same say says shall shan't she she'd she'll she's should shouldn't since so
    some still such than that that's the their theirs them themselves then there there's these they
    they'd they'll they're they've this those through thus to too under until up upon us very was wasn't
    we we'd we'll we're we've were weren't what what's whatever when when's where where's whether which
    while who who's whom whose why why's will with within without won't would wouldn't yet you you'd
    you'll you're you've your yours yourself yourselves thanks thank hello hi hey dear regards
"""))
# Words after which a full stop does not end a sentence ("Mr. Smith", "Inc. said", "No. 5").
ABBREVIATIONS = frozenset(word_list("""
    mr mrs ms dr prof sr jr st mt ft vs etc al e.g i.e inc ltd co corp llc plc gen col lt sgt capt cmdr
    adm gov sen rep rev hon pres supt dept univ assn bros no nos vol fig figs approx est ca cf op ed eds
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun u.s u.k
    u.n e.u a.m p.m ph.d
"""))
# Question words: stop words for matching, but they say what kind of answer is wanted (see select.py).
QUESTION_WORDS = frozenset(["what", "which", "who", "whom", "whose", "when", "where", "why", "how"])
POSSESSIVE_ENDS = ("'s", "’s", "s'", "s’")  # "Acme's", "the Lakers'": a word that owns the next
# A year from 1500 to 2099 standing alone: not inside a figure ("1,2019", "2019.5") or a word.
YEAR = re.compile(r"(?<![\w.,])(?:1[5-9]\d\d|20\d\d)(?!\w|[.,]\d)")


# Common irregular verb forms, so "sold" matches "sell" and "won" matches "win": Snowball stems suffixes, not these.
IRREGULAR = {
    "sold": "sell", "bought": "buy", "won": "win", "paid": "pay", "told": "tell", "took": "take", "taken": "take",
    "gave": "give", "given": "give", "began": "begin", "begun": "begin", "ran": "run", "held": "hold", "led": "lead",
    "met": "meet", "built": "build", "brought": "bring", "caught": "catch", "thought": "think", "spent": "spend",
    "sent": "send", "lost": "lose", "fell": "fall", "fallen": "fall", "rose": "rise", "risen": "rise", "grew": "grow",
    "grown": "grow", "knew": "know", "known": "know", "wrote": "write", "written": "write", "chose": "choose",
    "chosen": "choose", "drove": "drive", "driven": "drive", "flew": "fly", "flown": "fly", "found": "find",
    "kept": "keep", "struck": "strike", "stole": "steal", "stolen": "steal", "saw": "see", "seen": "see",
    "went": "go", "gone": "go", "came": "come", "became": "become", "bore": "bear", "born": "bear", "fought": "fight",
    "sought": "seek", "taught": "teach", "hung": "hang", "hanged": "hang", "shot": "shoot", "spoke": "speak",
    "spoken": "speak", "broke": "break", "broken": "break", "froze": "freeze", "frozen": "freeze", "hid": "hide",
    "hidden": "hide", "lent": "lend", "sat": "sit", "stood": "stand", "understood": "understand", "wore": "wear",
    "worn": "wear", "beaten": "beat", "dealt": "deal", "felt": "feel", "fled": "flee", "forgot": "forget",
    "forgotten": "forget", "meant": "mean", "sank": "sink", "sunk": "sink", "swore": "swear", "sworn": "swear",
    "threw": "throw", "thrown": "throw", "woke": "wake", "died": "die", "dies": "die", "dying": "die",
}
_SNOWBALL = Stemmer.Stemmer("english")


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The Snowball (Porter2) stem of a lowercased word, for matching (not for display), after mapping common
    irregular verbs to their base form: "companies" ~ "company", "sold" ~ "selling" ~ "sell"."""
    word = IRREGULAR.get(word, word)
    return _SNOWBALL.stemWord(word) if word.isalpha() else word


# Words a question asks with and the words its answer is told in, stemmed: "Who won?" is answered by "... a 3-1
# victory", "Who was appointed?" by "named X", "Where will it be held?" by "will host". Each group is one sense, and no
# word is in two groups (tests): a word of several senses ("step", "open", "return", "claim", "charge") is in none.
FAMILIES = [frozenset(stem(w) for w in group.split()) for group in (
    "win winner victory victor champion beat defeat triumph clinch",
    "score scorer goal",
    "buy acquire acquisition purchase pay deal takeover",
    "die death dead kill",
    "sell sale",
    "lead leader head chief",
    "say said tell state announce share explain confirm",
    "add introduce new support",
    "appoint appointment name hire pick choose",
    "premiere debut",
    "hold host venue",
    "unveil launch reveal",
    "find discover discovery unearth",
    "founded founder establish",
    "resign resignation quit",
    "sign ink",
    "cost price",
    "gross earn",
    "attend attendance crowd turnout",
)]
_KIN = {word: family for family in FAMILIES for word in family}


def kin(term: str) -> frozenset[str]:
    """The stemmed words of stemmed `term`'s family (itself among them), or none."""
    return _KIN.get(term, frozenset())


def normalise_token(raw: str) -> str:
    """The comparable form of one raw token: lowercased, curly apostrophe straightened, possessive "'s" dropped,
    numbers without thousands commas ("1,200" -> "1200"), dotted acronyms without dots ("U.S." -> "us")."""
    word = raw.lower().replace("\u2019", "'")
    if word.endswith("'s") and len(word) > 3:
        word = word[:-2]  # possessive: "Hawley's" matches "Hawley"
    if word[0].isdigit():
        return word.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+", word) else word
    if _ACRONYM.fullmatch(raw):
        return word.replace(".", "")
    return word


def _is_content(raw: str, word: str) -> bool:
    if raw.isupper() and word in _CAPITAL_NAMES:  # "US", "IT", "WHO" are names here
        return True
    if _ACRONYM.fullmatch(raw):  # "U.S.", "U.K." are names; "e.g.", "i.e." are not
        return word not in ("eg", "ie")
    if word in STOP_WORDS:
        return False
    return len(word) > 1 or word.isdigit()


@lru_cache(maxsize=1 << 16)
def _term(raw: str, stemmed: bool) -> str | None:
    """The term of one raw token, or None for a stop word (memoised: words repeat a lot)."""
    word = normalise_token(raw)
    if not _is_content(raw, word):
        return None
    return stem(word) if stemmed else word


def tokenize(text: str, *, stemmed: bool = True) -> Iterator[tuple[str, int, int]]:
    """Content terms of `text` with their offsets: (term, start, end); stop words and 1-letter words left out."""
    for m in _TOKEN.finditer(text):
        term = _term(m.group(), stemmed)
        if term is not None:
            yield term, m.start(), m.end()


def terms_of(text: str, *, stemmed: bool = True) -> list[str]:
    """The content terms of `text` in order, with repeats (tokenize without the offsets, faster)."""
    return [t for raw in _TOKEN.findall(text) if (t := _term(raw, stemmed)) is not None]


# Each space run is taken whole (`++`): a word follows it. "please , " is an optional "space, comma" before the
# spaces, not `\s*,?\s+`, whose two runs could share a long run of spaces in quadratically many ways.
_REQUEST = re.compile(
    r"^\s*+(?:(?:please|kindly)(?:\s*+,)?\s++)?(?:(?:can|could|would|will)\s++you\s++(?:please\s++)?)?"
    r"(?:tell\s++me|show\s++me|give\s++me|let\s++me\s++know|explain(?:\s++to\s++me)?|describe|find(?:\s++out)?|"
    r"list|summari[sz]e|look\s++up|search(?:\s++for)?|research|i\s++(?:want|would\s++like|need)\s++to\s++know|"
    r"do\s++you\s++know|i\s++wonder)\b[\s,:]*+", re.I)


def strip_request(text: str) -> str:
    """`text` without a leading request ("Please tell me", "Can you explain", "I want to know"), so that only
    what is asked about is matched: "Tell me who founded X" -> "who founded X"."""
    return _REQUEST.sub("", text, count=1)


def content_terms(text: str, *, stemmed: bool = False, unique: bool = True) -> list[str]:
    """Lowercased content words of `text` in order (stop words out; English list, other languages keep all
    words); `stemmed` applies the light stemmer (for matching, not display); `unique` keeps first occurrences."""
    terms = terms_of(text, stemmed=stemmed)
    if not unique:
        return terms
    return list(dict.fromkeys(terms))
