"""The redaction gate finds every secret a full scan finds: for a string made to match each
token-shaped pattern (gitleaks' rules, ingest/secret_rules.py, and VALUE_PATTERNS' own), in
the contexts such tokens turn up in, scrubbing through the gate equals VALUE_RE.sub over the
whole string. The strings are drawn from the patterns themselves (a small sampler over
Python's parsed regex), so a rule added later is covered without a new example."""

from __future__ import annotations

import random
import re
import string
from re import _constants as C
from re import _parser

import pytest

from ingest import redact
from ingest.limits import DEFAULT_LIMITS
from ingest.secret_rules import RULES


@pytest.fixture(autouse=True, params=["automaton", "runs"])
def gate_way(request, monkeypatch):
    """Every test here runs both ways of the gate's first look: pyahocorasick's automaton (the
    server's) and the regex over token runs (the eval runner's, without it)."""
    if request.param == "runs":
        monkeypatch.setattr(redact, "_CUE_AUTOMATON", None)
    elif redact._CUE_AUTOMATON is None:
        pytest.skip("pyahocorasick is not installed")
    return request.param


_CATEGORY = {
    C.CATEGORY_DIGIT: string.digits,
    C.CATEGORY_WORD: string.ascii_letters + string.digits + "_",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_NOT_SPACE: string.ascii_letters + string.digits + "-",
}


def _charset(items) -> str:
    chars: list[str] = []
    negate = False
    for op, arg in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            chars.append(chr(arg))
        elif op is C.RANGE:
            chars.extend(chr(c) for c in range(arg[0], arg[1] + 1))
        elif op is C.CATEGORY:
            chars.extend(_CATEGORY[arg])
    if negate:
        return "".join(c for c in string.ascii_letters + string.digits + " " if c not in chars)
    return "".join(chars)


def _sample(parsed, rng: random.Random) -> str:
    out = []
    for op, arg in parsed:
        if op is C.LITERAL:
            out.append(chr(arg))
        elif op is C.NOT_LITERAL:
            out.append("x" if chr(arg) != "x" else "y")
        elif op is C.IN:
            out.append(rng.choice(_charset(arg)))
        elif op is C.ANY:
            out.append(rng.choice(string.ascii_letters))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            low, high, item = arg
            count = rng.randint(low, min(high, low + 8) if high is not C.MAXREPEAT else low + 8)
            out.extend(_sample(item, rng) for _ in range(count))
        elif op is C.SUBPATTERN:
            out.append(_sample(arg[3], rng))
        elif op is C.BRANCH:
            out.append(_sample(rng.choice(arg[1]), rng))
        elif op in (C.ASSERT, C.ASSERT_NOT, C.AT):
            continue
        else:
            raise NotImplementedError(op)
    return "".join(out)


_TOKEN_PATTERNS = [(name, pattern) for name, _, pattern in RULES] + [
    (f"own {name}", pattern) for name, pattern in redact.VALUE_PATTERNS if name in redact._TOKEN_PATTERN_NAMES
]
_CONTEXTS = ("{}", "x {} y", '{{"token_field": "{}"}}', "see https://example.com/a?b={}&c=1", "path/{}/more", "({})", "x\n{}")


@pytest.mark.parametrize(("name", "pattern"), _TOKEN_PATTERNS, ids=[name for name, _ in _TOKEN_PATTERNS])
def test_a_token_made_by_its_own_pattern_is_scrubbed_as_a_full_scan_scrubs_it(name, pattern):
    rng = random.Random(name)
    parsed = _parser.parse(pattern)
    for _ in range(20):
        token = _sample(parsed, rng)
        assert re.fullmatch(pattern, token), (name, token)
        for context in _CONTEXTS:
            text = context.format(token)
            full = redact.VALUE_RE.sub(redact._replace, text)
            assert redact.scrub_text(text) == full, text
            # and inside a map, where the gate runs over all of its strings at once
            stored = redact.redact_attributes({"a": text, "b": "some other value here"}, DEFAULT_LIMITS)["a"]
            assert stored == full, text


def test_the_token_run_length_is_the_shortest_a_token_pattern_can_match():
    widths = [_parser.parse(pattern).getwidth()[0] for _, pattern in _TOKEN_PATTERNS]
    assert redact.TOKEN_RUN_CHARS == min(widths)


def test_a_string_without_any_cue_is_not_searched_at_all():
    assert redact._gate("the task runner could not find /home/agent/.config/tool/settings.json") == []
    assert redact._gate("lookup_order raised TimeoutError after 30.0s calling https://api.example.com/v1/orders/1") == []


def _reference_gate(text: str) -> set[str]:
    """The cues of an ASCII string by the gate's definition, spelled out: the word cues anywhere;
    in each run of TOKEN_RUN_CHARS or more token characters, a token cue where it follows a
    character that is not a letter or digit (or starts the run), and "eyj" anywhere."""
    lowered = text.lower()
    hits = {cue for cue in redact._WORD_CUES if cue in lowered}
    for run in re.findall(r"[%s]{%d,}" % (redact._TOKEN_CHARS, redact.TOKEN_RUN_CHARS), lowered):
        hits.update(cue for cue in redact._TOKEN_CUES if re.search(r"(?<![a-z0-9])" + re.escape(cue), run))
        if "eyj" in run:
            hits.add("eyj")
    if "@" in hits and "://" not in lowered:
        hits.discard("@")
    return hits


def test_the_gate_finds_the_cues_its_definition_gives_in_strings_crowded_with_them(gate_way):
    """The automaton's one pass (redact._CUE_AUTOMATON, redact._in_token_run) against the
    definition, on strings of cues, token characters and separators, short runs and long. The
    regex over the runs finds one cue where several start at one place, the shortest, whose
    rule starts cover the others' (redact._STARTS_OF_CUE)."""
    rnd = random.Random(7)
    pieces = [*redact.GATE_LITERALS, *redact._TOKEN_CUES, "eyJ", "://", "@", " ", "/", "_", "-", ".", "=", "~", "+",
              "x", "1", "A", "Z", "\n", '"', ":", ",", "abcdefgh", "0123456789"]  # fmt: skip
    for _ in range(20000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 14)))
        found, defined = set(redact._gate(text)), _reference_gate(text)
        if gate_way == "automaton":
            assert found == defined, text
        else:
            assert found <= defined and all(any(cue.startswith(hit) for hit in found) for cue in defined), text


def test_the_token_runs_are_those_a_regex_finds():
    """Without the automaton the gate splits an ASCII string into its runs of token characters
    with a byte table (redact._TOKEN_BYTES) instead of a regex: the runs it keeps are exactly the regex's."""
    regex = re.compile(r"[%s]{%d,}" % (redact._TOKEN_CHARS, redact.TOKEN_RUN_CHARS))
    rnd = random.Random(7)
    alphabet = string.printable + "\x00\x7f"
    for _ in range(3000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 80))).lower()
        runs = [run.decode() for run in text.encode().translate(redact._TOKEN_BYTES).split()]
        assert [run for run in runs if len(run) >= redact.TOKEN_RUN_CHARS] == regex.findall(text), text


def test_a_cue_counts_inside_a_long_enough_run_only():
    assert redact._in_token_run("x sk-abcdefghi y", 2, 5)  # "sk-abcdefghi": 12 token characters
    assert not redact._in_token_run("x sk-abcdefgh y", 2, 5)  # 11
    assert redact._in_token_run("a/b/c/d/e/sk-", 10, 13)  # the run is long on its left
    assert not redact._in_token_run("sk- abcdefghijkl", 0, 3)
    assert redact._gate("path/to/sk-") == []  # 11 characters: no token pattern fits
    assert redact._gate("x/path/to/sk-") == ["sk-"]


# Every own pattern but the rules (sampled one by one above), the key=value one included: its
# key words are what the gate's cues narrow the starts tried by (redact._OWN_START_CUES).
_OWN_PATTERNS = [(name, pattern) for name, pattern in redact.VALUE_PATTERNS if name != "rules"]
# Contexts that also hold other starts ("id", "api", "gh", "access", "://") and cues of other patterns.
_CROWDED = ("{}", "id=7 api gh access {} tail", "GET https://idp.example.com/api?x=1 then {} and a key", "auth: {}")


@pytest.mark.parametrize(("name", "pattern"), _OWN_PATTERNS, ids=[name for name, _ in _OWN_PATTERNS])
def test_every_own_pattern_is_scrubbed_through_the_gate_as_a_full_scan_scrubs_it(name, pattern):
    rng = random.Random(f"own {name}")
    parsed = _parser.parse(pattern)
    checked = 0
    for _ in range(80):
        sample = _sample(parsed, rng)
        if not re.fullmatch(pattern, sample):
            # The sampler skips lookarounds: the URL rule's "(?=@)" needs its host after it; any
            # other draw that breaks one is no example.
            match = re.match(pattern, sample + "@db.example.com")
            if match is None or match.end() != len(sample):
                continue
            sample += "@db.example.com"
        checked += 1
        for context in _CONTEXTS + _CROWDED:
            text = context.format(sample)
            full = redact.VALUE_RE.sub(redact._replace, text)
            assert redact.scrub_text(text) == full, text
            assert redact.redact_attributes({"a": text, "b": "some other value here"}, DEFAULT_LIMITS)["a"] == full, text
    assert checked >= 20, checked


def test_every_own_start_has_the_cues_that_let_it_be_tried():
    assert set(redact._OWN_START_CUES) == set(redact._OWN_MATCH_STARTS)
    cues = set(redact.GATE_LITERALS) | {"@"}
    assert all(found and found <= cues for found in redact._OWN_START_CUES.values())
    # a rule start an own start begins is tried when the rule's own cue is found
    assert "api_org_" in redact._OWN_START_CUES["api"]


def test_a_stacktrace_with_one_cue_is_tried_only_where_that_cue_can_begin_a_match():
    starts = redact._starts_of_hits(("auth",))
    assert "auth" in starts and not {"id", "api", "gh", "access", "://"} & set(starts)
    trace = 'File "/app/httpx/_client.py", line 1585, in send\n    response = await self._send_handling_auth(request, auth=auth)'
    assert redact.scrub_text(trace) == redact.VALUE_RE.sub(redact._replace, trace)
