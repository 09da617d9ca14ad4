"""Secrets never reach storage; strings are made safe to store.

Pure: no Django, no database. `otlp.py` runs every attribute map, event name and
status message through here before a `SpanRecord` exists.

Two independent guards:

1. By key. An attribute (or a nested kvlist / JSON-object key) whose name looks like a
   credential has its value replaced by REDACTED, whatever the value is; only
   `None`, booleans and "" are kept, since they cannot carry a secret and "the header
   was empty" is worth seeing when debugging auth failures. Keys are split into
   lower-case words (dots, dashes, underscores, spaces and camelCase all separate
   words), then matched against the word and phrase tables below.
2. By value. Credential-shaped substrings anywhere in a string (free text, a JSON
   argument serialised into a string, a traceback) are replaced, whatever the key.

Then every string is cleaned: NUL (which PostgreSQL `text` and `jsonb` cannot hold)
and lone surrogates (which cannot be encoded as UTF-8) become U+FFFD, and strings
over the limit are cut and end with TRUNCATION_MARKER. Redaction runs before the
cut, so a secret straddling the cut cannot leave a recognisable-but-unmatched head;
of a string far over the limit only the part kept plus SCRUB_MARGIN is scanned.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from ingest.secret_rules import RULES

try:  # C, among the server's dependencies; the eval runner's wheel (evals/runner) is standard library only
    import ahocorasick
except ImportError:
    ahocorasick = None

REDACTED = "[REDACTED]"
# A cut string ends with f"{TRUNCATION_MARKER}{removed} chars]".
TRUNCATION_MARKER = "…[truncated "
# A kvlist/array nested deeper than limits.max_value_depth is replaced by this.
DEPTH_MARKER = "[nested too deep]"
# What the input bounds leave in place of what they cut (docs/contract/limits.md#what-was-cut):
# an attribute over its span's (or request's) budget; the last item of a shortened array;
# the last entry of a shortened kvlist (its value: how many entries were cut).
CUT_BUDGET_MARKER = "[cut: over the attribute budget]"
CUT_ENTRIES_KEY = "toolwatch.cut_entries"


def cut_items_marker(count: int) -> str:
    return f"[cut: {count} more items]"


# ---------------------------------------------------------------------------
# Credential keys
# ---------------------------------------------------------------------------
# A key is secret when one of its words is in SECRET_KEY_WORDS, or two consecutive
# words form a SECRET_KEY_PHRASES entry. Examples (key -> words -> verdict):
#   http.request.header.authorization  -> [... authorization]    -> secret
#   http.request.header.x-api-key      -> [... x, api, key]      -> secret (api key)
#   apiKey / APIKey / api_key / apikey -> [api, key] / [apikey]  -> secret
#   oauth.access_token, refreshToken   -> [... access, token]    -> secret (token)
#   gen_ai.usage.input_tokens          -> [... input, tokens]    -> kept ("tokens" counts)
#   gen_ai.request.max_tokens          -> [... max, tokens]      -> kept
#   llm.token_count.prompt             -> [llm, token, count ..] -> kept (token + count word)
#   gen_ai.token.type                  -> [gen, ai, token, type] -> kept (a metric dimension)
#   session.id                         -> [session, id]          -> kept: OpenInference and GenAI
#                                         use it to group a conversation's traces; it does not
#                                         authenticate anything. Session cookies are caught as cookies.
#   pwd                                -> kept: it is the working directory far more often
#                                         than a password.
#   db_pass, dbPass, auth, x-auth      -> secret ("pass" and "auth" as whole words)
#   auth.type, auth_method, pass_rate  -> kept (next to a word of KIND_WORDS: what kind, not the secret)
#   key, cache_key, s3.key, key.id     -> kept: a bare "key" in a tool's arguments is a dict, cache,
#                                         object or idempotency key far more often than a credential;
#                                         a credential-shaped value under it is still caught by value.
#   license_key, account_key, app_key  -> secret (a credential's own kind of key: SECRET_KEY_PHRASES)
#   PGPASSWORD, MYSQL_PWD_PASSWORD     -> secret (the squashed key contains "password" / "passwd")
SECRET_KEY_WORDS = frozenset(
    {
        "authorization", "auth", "pass", "creds",
        "password", "passwd", "passphrase",
        "secret", "secrets",
        "token", "apikey", "xapikey", "accesstoken", "refreshtoken", "idtoken", "authtoken",
        "sessiontoken", "csrftoken", "xsrftoken", "bearer", "jwt",
        "cookie", "cookies", "setcookie",
        "credential", "credentials",
        "privatekey", "secretkey", "accesskey", "clientsecret", "sessionkey", "signingkey",
    }
)  # fmt: skip
SECRET_KEY_PHRASES = frozenset(
    {
        ("api", "key"),
        ("private", "key"),
        ("access", "key"),
        ("session", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("master", "key"),
        ("license", "key"),
        ("account", "key"),
        ("app", "key"),
        ("shared", "key"),
        ("auth", "key"),
        ("client", "key"),
    }
)
# Squashed keys containing one of these are secret whatever surrounds them ("PGPASSWORD").
SECRET_KEY_INFIXES = ("password", "passwd", "apikey", "secretkey", "privatekey", "accesstoken", "clientsecret")
# "auth" or "pass" next to one of these words names a kind, a setting or a result, not the secret.
KIND_WORDS = frozenset(
    {
        "type", "types", "method", "methods", "scheme", "mode", "provider", "kind", "name", "required",
        "enabled", "status", "error", "errors", "url", "uri", "endpoint", "domain", "server", "flow",
        "rate", "count", "fail", "through", "at", "k", "result", "results", "state",
    }
)  # fmt: skip
# "token" next to one of these words names a count or a kind of token, not a credential.
TOKEN_COUNT_WORDS = frozenset(
    {
        "count", "counts", "usage", "limit", "limits", "budget", "type", "max", "input", "output",
        "prompt", "completion", "total", "reasoning", "cached", "num", "number",
    }
)  # fmt: skip

# ---------------------------------------------------------------------------
# Credential-shaped values (searched inside any string)
# ---------------------------------------------------------------------------
# (name, regex); each is one alternative of the single compiled VALUE_RE. The
# replacement keeps what tells a reader what was there: the scheme word of an
# Authorization value, the key of a key=value pair, the user of a URL.
_KV_KEYS = (
    r"(?i:pass(?:word|wd|phrase)|secret|api[_-]?key|(?:access|refresh|auth|id|session|bearer)[_-]?token"
    r"|token|authorization|cookie|credentials?|private[_-]?key"
    # Azure connection strings and SAS URLs (AccountKey=…;, SharedAccessKey=…, …&sig=…), and
    # "pass=" / "auth=" / "db_pass=" as whole words (not "bypass=", "oauth=": those have a letter before)
    r"|account[_-]?key|shared[_-]?access[_-]?(?:key|signature)|(?<![a-z])(?:sig|pass|auth|creds)"
    r"|(?:secret[_-]?)?access[_-]?key|secret[_-]?key)"
)
# gitleaks' self-naming credentials (ingest/secret_rules.py), one alternative: a token of
# theirs is a secret wherever it appears. Bounded left and right by a non-alphanumeric.
_RULES_RE = r"(?<![A-Za-z0-9])(?:" + "|".join(pattern for _, _, pattern in RULES) + r")(?![A-Za-z0-9])"
VALUE_PATTERNS = (
    # "Bearer <token>" (the token has a digit or punctuation, or is long: not "bearer instrument")
    ("bearer", r"(?P<bearer>(?i:bearer)\s+)(?=[A-Za-z]{20}|[A-Za-z]*[0-9._~+/\-])[A-Za-z0-9._~+/\-]{8,}=*"),
    # "Basic <base64 user:password>" anywhere in text (not "basic research": a digit, +, / or =, or long)
    ("basic", r"(?P<basic>(?<![A-Za-z])(?i:basic)\s+)(?=[A-Za-z]{20}|[A-Za-z]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}(?![A-Za-z0-9+/=])"),
    # OpenAI / Anthropic style: sk-…, sk-proj-…, sk-ant-api03-… (not "task-…", "desk-…")
    ("sk", r"(?<![A-Za-z0-9_])sk-[A-Za-z0-9_\-]{20,}"),
    # Stripe-style secret / restricted keys
    ("stripe", r"(?<![A-Za-z0-9_])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    # AWS access key ids (long-term AKIA, temporary ASIA)
    ("aws", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    # JSON Web Tokens: header.payload.signature, both first parts base64url of "{"
    ("jwt", r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
    # GitHub tokens
    ("github", r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    # Slack tokens
    ("slack", r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,}"),
    # Google API keys
    ("google", r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),
    # PEM private keys (to the END line, or to the end of a value cut before it)
    ("pem", r"-----BEGIN[A-Z ]{0,20} PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]{0,20} PRIVATE KEY-----|\Z)"),
    # user:password@ in URLs and connection strings
    ("url", r"(?P<url>://[^\s:/@\"']{0,256}:)[^\s/@\"']{1,256}(?=@)"),
    # key=value / "key": "value" in free text and serialised JSON (optionally \"-escaped;
    # a quoted value may be cut short, as OpenLLMetry cuts long JSON); "Authorization:
    # Bearer x" loses scheme and token together
    (
        "kv",
        r"(?P<kv>" + _KV_KEYS + r"\\?[\"']?\s{0,8}[:=]\s{0,8})"
        r"(?P<kvval>(?i:bearer|basic|token)\s+[A-Za-z0-9._~+/\-]+=*"
        r"|\\\"(?:[^\"\\]|\\[^\"])*(?:\\\"|\Z)|\"(?:[^\"\\\n]|\\.)*(?:\"|\Z)|'[^'\n]*(?:'|\Z)"
        r"|[^\s\"',;&}\])\\<>]+)",
    ),
    ("rules", _RULES_RE),
)
VALUE_RE = re.compile("|".join(f"(?:{pattern})" for _, pattern in VALUE_PATTERNS))
# Every VALUE_RE match contains one of these (lower-cased), or both "@" and "://".
# Checking them with `in` costs about 0.4 ns per character each; scanning with
# VALUE_RE itself, whose alternatives share no rare first character, costs ~20 ns
# per character. Most strings contain none of them and never reach VALUE_RE.
_OWN_GATE_LITERALS = (
    "key", "token", "pass", "secret", "auth", "cookie", "credential", "cred", "bearer", "basic", "sig",
    "sk-", "sk_", "rk_", "akia", "asia", "eyj", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
    "xox", "aiza",
)  # fmt: skip
# Of those, the ones looked for in the whole of every string (with `in`): the key words of the
# key=value rule, Bearer / Basic, and "@" for the URL rule (it counts only with a "://").
# "credential" is not among them: any string holding it holds "cred".
_WORD_CUES = ("key", "token", "pass", "secret", "auth", "cookie", "cred", "bearer", "basic", "sig", "@")
# The rest start a token-shaped secret (sk-…, AKIA…, eyJ…, ghp_…; and gitleaks' rules): a run
# of TOKEN_RUN_CHARS or more token characters, which most strings (prose, messages, small
# JSON) do not hold at all. Only when one does are the runs searched for these starts.
_OWN_TOKEN_CUES = tuple(cue for cue in _OWN_GATE_LITERALS if cue not in _WORD_CUES and cue != "credential")


def _uncovered(starts, cues) -> tuple[str, ...]:
    """The starts no cue is part of (a string holding one of them holds the cue too)."""
    return tuple(sorted({start for start in starts if not any(cue in start for cue in cues)}))


_RULE_STARTS = tuple(start for _, starts, _ in RULES for start in starts)
# The rules' starts no own cue covers: looked for, with the own token cues, only inside runs
# of token characters (checking ~80 more literals on every string cost ~2.5x the whole gate).
RULE_CUES = _uncovered(_RULE_STARTS, _OWN_GATE_LITERALS)
GATE_LITERALS = _OWN_GATE_LITERALS + RULE_CUES
# Every VALUE_RE match starts with one of these (lower-cased; "gh" for gh?_ tokens, "auth"
# for authorization and auth_token). Keep them in step with VALUE_PATTERNS and _KV_KEYS.
_OWN_MATCH_STARTS = (
    "bearer", "basic", "sk-", "sk_", "rk_", "akia", "asia", "eyj", "gh", "github_pat_", "xox", "aiza", "-----begin",
    "://", "pass", "secret", "api", "access", "refresh", "auth", "id", "session", "token", "cookie", "credential",
    "private", "account", "shared", "sig", "cred",
)  # fmt: skip
_RULE_MATCH_STARTS = tuple(
    sorted({start for start in _RULE_STARTS if not any(start.startswith(own) for own in _OWN_MATCH_STARTS)})
)
MATCH_STARTS = _OWN_MATCH_STARTS + _RULE_MATCH_STARTS
# cue -> the rules' match starts a string holding that cue may hold: each is looked for only
# when the gate found its cue (a rule start holds its own cue, or an own cue covering it).
_STARTS_OF_CUE: dict[str, tuple[str, ...]] = {
    cue: tuple(start for start in _RULE_MATCH_STARTS if cue in start)
    for cue in (*_OWN_GATE_LITERALS, *_uncovered(_RULE_STARTS, _OWN_GATE_LITERALS))
}
# Own start -> the cues of which a string holding a VALUE_RE match that begins there holds one
# (lower-cased): its own pattern's (the key words of _KV_KEYS: "api" begins only "api_key", "id"
# only "id_token"; PEM's "PRIVATE KEY"; the URL rule's "@"), and the cue of every rule start it
# begins ("api" begins gitleaks' "api_org_", which holds no "key"). A string is then searched
# from an own start only when the gate found one of its cues: a stacktrace holding
# "_send_handling_auth" is tried at its "auth"s, not at every "id", "api" and "gh" in it.
# Keep in step with VALUE_PATTERNS and _KV_KEYS (tests/ingest/test_redact_gate.py checks samples
# of every pattern against a full scan).
_OWN_START_CUES: dict[str, set[str]] = {
    "bearer": {"bearer"}, "basic": {"basic"}, "sk-": {"sk-"}, "sk_": {"sk_"}, "rk_": {"rk_"}, "akia": {"akia"},
    "asia": {"asia"}, "eyj": {"eyj"}, "gh": {"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, "github_pat_": {"github_pat_"},
    "xox": {"xox"}, "aiza": {"aiza"}, "-----begin": {"key"}, "://": {"@"}, "pass": {"pass"}, "secret": {"secret"},
    "api": {"key"}, "access": {"token", "key"}, "refresh": {"token"}, "auth": {"auth"}, "id": {"token"},
    "session": {"token"}, "token": {"token"}, "cookie": {"cookie"}, "credential": {"cred", "credential"},
    "private": {"key"}, "account": {"key"}, "shared": {"key", "sig"}, "sig": {"sig"}, "cred": {"cred"},
}  # fmt: skip
for _start in _RULE_STARTS:
    for _own in _OWN_MATCH_STARTS:
        if _start.startswith(_own):
            _OWN_START_CUES[_own].update(cue for cue in GATE_LITERALS if cue in _start)


@functools.lru_cache(maxsize=1024)
def _starts_of_hits(hits: tuple[str, ...]) -> tuple[str, ...]:
    """Where a VALUE_RE match may begin in an ASCII string whose gate found `hits`."""
    found = set(hits)
    own = tuple(start for start in _OWN_MATCH_STARTS if not found.isdisjoint(_OWN_START_CUES[start]))
    return own + tuple({start for cue in hits for start in _STARTS_OF_CUE.get(cue, ())})


# Every cue, for a string that is not ASCII (looked for with `in`, as its runs are not).
GATE_CUES = (*_OWN_GATE_LITERALS, *RULE_CUES, "@")
# The token-shaped patterns: gitleaks' rules and VALUE_PATTERNS' own token alternatives.
_TOKEN_PATTERN_NAMES = ("sk", "stripe", "aws", "jwt", "github", "slack", "google")
# Every match of a token-shaped pattern is, in an ASCII string, a run of at least this many of
# _TOKEN_CHARS (their shortest possible match: slack-app-token's 12 characters), computed
# from the patterns themselves, so a new rule cannot slip under it.
_TOKEN_CHARS = r"A-Za-z0-9_\-.~+/="
TOKEN_RUN_CHARS = min(
    re._parser.parse(pattern).getwidth()[0]
    for pattern in (
        *(pattern for _, _, pattern in RULES),
        *(pattern for name, pattern in VALUE_PATTERNS if name in _TOKEN_PATTERN_NAMES),
    )
)
# Each token cue where such a secret can start: after a character that is not a letter or digit
# (every token pattern's lookbehind but the JWT's, whose "eyj" counts anywhere in a run).
_TOKEN_CUES = tuple(sorted(set(_OWN_TOKEN_CUES + RULE_CUES) - {"eyj"}, key=lambda cue: (len(cue), cue)))
_TOKEN_CHAR_SET = frozenset(c for c in map(chr, range(128)) if re.fullmatch(f"[{_TOKEN_CHARS}]", c))
_TOKEN_RUN_RE = re.compile(f"[{_TOKEN_CHARS}]*")
# How a cue the automaton finds counts: anywhere (the word cues), where a token may start, or anywhere
# inside a run of token characters (both of those only in a run of TOKEN_RUN_CHARS or more).
_ANYWHERE, _AT_A_TOKEN_START, _IN_A_RUN = 0, 1, 2


def _cue_automaton():
    """Every cue of an ASCII string's first look, found in one pass (Aho-Corasick, in C), or None
    without pyahocorasick. The other way, 11 `in` scans of the word cues, then a regex over the
    string's token runs for the ~90 token cues (_gate_by_runs), costs ~2.5x as much
    (docs/benchmarks.md, "Session 12"); the eval runner takes it."""
    if ahocorasick is None:
        return None
    automaton = ahocorasick.Automaton()
    for cue in _WORD_CUES:
        automaton.add_word(cue, (cue, _ANYWHERE))
    for cue in _TOKEN_CUES:
        automaton.add_word(cue, (cue, _AT_A_TOKEN_START))
    automaton.add_word("eyj", ("eyj", _IN_A_RUN))
    automaton.make_automaton()
    return automaton


_CUE_AUTOMATON = _cue_automaton()


def _in_token_run(lowered: str, start: int, end: int) -> bool:
    """Whether lowered[start:end] lies inside a run of TOKEN_RUN_CHARS or more token characters.
    Reads at most that many characters either side, so a hit costs the same in any string."""
    right = _TOKEN_RUN_RE.match(lowered, start, start + max(TOKEN_RUN_CHARS, end - start)).end()
    if right < end:
        return False
    need = TOKEN_RUN_CHARS - (right - start)
    left = start
    while need > 0 and left and lowered[left - 1] in _TOKEN_CHAR_SET:
        left -= 1
        need -= 1
    return need <= 0


# Without the automaton: an ASCII string's runs of token characters, translated to bytes where every
# other character is a space, then split (both C loops of a few instructions a byte; a regex,
# [...]{N,}, costs ~220 instructions a character, as sre tries a match at every position of every
# word), and the token cues looked for in them by one regex built as a character trie.
_TOKEN_BYTES = bytes(i if re.fullmatch(f"[{_TOKEN_CHARS}]", chr(i)) else 0x20 for i in range(256))


def _trie_pattern(words) -> str:
    """A regex matching any of `words`, branching one character at a time (re tries a flat
    alternation's ~90 literals one by one at every position: 6x slower); where one word is a
    prefix of another, the shorter matches."""
    rests: dict[str, set[str]] = {}
    ends = False
    for word in words:
        if word:
            rests.setdefault(word[0], set()).add(word[1:])
        else:
            ends = True
    branches = [re.escape(first) + _trie_pattern(rest) for first, rest in sorted(rests.items())]
    if not branches:
        return ""
    return "(?:" + ("|" if ends else "") + "|".join(branches) + ")"


_TOKEN_CUE_RE = re.compile(r"[^a-z0-9](?=(%s))" % _trie_pattern(_TOKEN_CUES))


# No pattern can match fewer characters than this (e.g. "token=ab").
MIN_SECRET_CHARS = 8
# A string longer than its limit is scrubbed only this far past the cut: the rest is
# never stored, and a 64 MiB value must not cost seconds of regex time. The margin
# lets a secret that straddles the cut still be recognised (and replaced) whole.
SCRUB_MARGIN = 1024

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_KEY_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_key_cache: dict[str, bool] = {}
# key_chars -> {raw key: (stored key, is secret)}, for the attribute-map hot loop
_key_entries: dict[int, dict[str, tuple[str, bool]]] = {}
_KEY_CACHE_MAX = 20_000  # keys repeat; a sender of random keys only resets the cache


def is_secret_key(key: str) -> bool:
    """Does an attribute key name a credential (see the tables above)?"""
    verdict = _key_cache.get(key)
    if verdict is None:
        verdict = _classify_key(key)
        if len(_key_cache) >= _KEY_CACHE_MAX:
            _key_cache.clear()
        _key_cache[key] = verdict
    return verdict


def _classify_key(key: str) -> bool:
    words = [word.lower() for word in _KEY_WORD_RE.findall(key)]
    for i, word in enumerate(words):
        if word == "token" or word == "auth" or word == "pass":
            neighbours = words[max(i - 1, 0) : i] + words[i + 1 : i + 2]
            if any(n in (TOKEN_COUNT_WORDS if word == "token" else KIND_WORDS) for n in neighbours):
                continue
            return True
        if word in SECRET_KEY_WORDS:
            return True
        if i and (words[i - 1], word) in SECRET_KEY_PHRASES:
            return True
    # Also the whole key squashed: "x_api_key" -> "xapikey", "Set-Cookie" -> "setcookie".
    squashed = "".join(words)
    return squashed in SECRET_KEY_WORDS or any(infix in squashed for infix in SECRET_KEY_INFIXES)


def _replace(match: re.Match) -> str:
    if match.group("kv") is not None:
        value = match.group("kvval")
        bare = value.strip("\\\"'")
        if bare.isdigit() or bare == REDACTED:  # "max_token=100" is a count, not a secret
            return match.group(0)
        if value.startswith('\\"'):
            quote = '\\"'
        elif value[0] in "\"'":
            quote = value[0]
        else:
            quote = ""
        return match.group("kv") + quote + REDACTED + quote
    if match.group("bearer") is not None:
        return match.group("bearer") + REDACTED
    if match.group("url") is not None:
        return match.group("url") + REDACTED
    if match.group("basic") is not None:
        return match.group("basic") + REDACTED
    return REDACTED


def _gate(text: str, cues: tuple[str, ...] | None = None) -> list[str]:
    """The cues `text` holds (ignoring case); none means VALUE_RE cannot match it.

    The first look at an ASCII string (no `cues`) finds the word cues anywhere in it, and the
    token cues only where a token-shaped secret could be: in a run of TOKEN_RUN_CHARS token
    characters, the most at a token's start (_CUE_AUTOMATON, one pass). The cues found in a
    map's strings joined are the only ones each of its strings can hold, so each string is then
    gated on those alone (usually one) instead of all of them.
    """
    if not text.isascii():
        # casefold, not lower: IGNORECASE parts of VALUE_RE also match "ſ" for "s", "K" for "k".
        lowered = text.casefold()
        hits = [cue for cue in (cues or GATE_CUES) if cue in lowered]
    elif cues is not None:
        lowered = text.lower()
        hits = [cue for cue in cues if cue in lowered]
    elif _CUE_AUTOMATON is None:
        lowered = text.lower()
        hits = _gate_by_runs(lowered)
    else:
        lowered = text.lower()
        hits = []
        for end, (cue, where) in _CUE_AUTOMATON.iter(lowered):
            if cue in hits:
                continue
            if where != _ANYWHERE:
                start = end - len(cue) + 1
                if where == _AT_A_TOKEN_START and start and lowered[start - 1].isalnum():
                    continue
                if not _in_token_run(lowered, start, end + 1):
                    continue
            hits.append(cue)
    if "@" in hits and "://" not in lowered:
        hits.remove("@")
    return hits


def _gate_by_runs(lowered: str) -> list[str]:
    """_gate's first look at a lowered ASCII string without the automaton: the same cues."""
    hits = [cue for cue in _WORD_CUES if cue in lowered]
    runs = [run for run in lowered.encode().translate(_TOKEN_BYTES).split() if len(run) >= TOKEN_RUN_CHARS]
    if runs:
        runs = "\n" + b"\n".join(runs).decode()
        hits += {cue for cue in _TOKEN_CUE_RE.findall(runs) if cue not in hits}
        if "eyj" in runs:
            hits.append("eyj")
    return hits


def scrub_text(text: str) -> str:
    """Replace credential-shaped substrings (VALUE_PATTERNS) of any string."""
    return _scrub(text, None)


def _scrub(text: str, cues) -> str:
    if len(text) < MIN_SECRET_CHARS:
        return text
    hits = _gate(text, cues)
    if not hits:
        return text
    return _sub_secrets(text, hits)


def _sub_secrets(text: str, hits=None) -> str:
    """VALUE_RE.sub(_replace, text), trying VALUE_RE only where a match can start.

    VALUE_RE's alternatives leave the regex engine nothing to skip ahead on, so `sub`
    costs ~0.5 µs per character; matching at the few MATCH_STARTS positions gives the
    same leftmost, non-overlapping matches (lookbehinds still see the text before).
    """
    if not text.isascii():  # only in ASCII does lower() keep every position, and IGNORECASE
        return VALUE_RE.sub(_replace, text)  # mean ASCII case alone (re also folds "ſ" to "s")
    lowered = text.lower()
    starts = set()
    candidates = MATCH_STARTS
    if hits is not None:  # the gate's cues: only the starts that those cues allow
        candidates = _starts_of_hits(tuple(hits))
    for start in candidates:
        at = lowered.find(start)
        while at >= 0:
            starts.add(at)
            at = lowered.find(start, at + 1)
    pieces: list[str] = []
    done = 0
    for at in sorted(starts):
        if at < done:
            continue
        match = VALUE_RE.match(text, at)
        if match:
            pieces += (text[done:at], _replace(match))
            done = match.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def clean_string(text: str, max_chars: int) -> str:
    """NUL and lone surrogates -> U+FFFD; cut to at most max_chars, ending with the truncation marker."""
    return _clean(text, max_chars, 0)


def _clean(text: str, max_chars: int, hidden: int) -> str:
    # hidden: characters already sliced off the end (they count in the marker)
    if hidden or len(text) > max_chars:
        text = _truncate(text, max_chars, len(text) + hidden)
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if not text.isascii() and _SURROGATE_RE.search(text):
        text = _SURROGATE_RE.sub("\ufffd", text)
    return text


def _truncate(text: str, max_chars: int, total: int) -> str:
    removed = total - max_chars
    for _ in range(3):  # the marker's own length depends on the count it prints
        marker = f"{TRUNCATION_MARKER}{removed} chars]"
        keep = max_chars - len(marker)
        if keep < len(marker):  # a limit too small for a marker: a plain cut
            return text[:max_chars]
        removed = total - keep
    return text[:keep] + f"{TRUNCATION_MARKER}{removed} chars]"


def redact_string(text: str, max_chars: int) -> str:
    """scrub_text, then clean_string: for span names, event names and status messages."""
    return _store_text(text, max_chars, None)


# cues: what to gate the (already cut) text on before scrubbing it; None: every cue (a first
# look); (): do not scrub
def _store_text(text: str, max_chars: int, cues) -> str:
    hidden = 0
    if len(text) > max_chars + SCRUB_MARGIN:
        hidden = len(text) - (max_chars + SCRUB_MARGIN)
        text = text[: max_chars + SCRUB_MARGIN]
    if cues is None or cues:
        text = _scrub(text, cues)
    return _clean(text, max_chars, hidden)


def redact_attributes(attrs: Mapping[str, Any], limits) -> dict[str, Any]:
    """A new attribute map that is safe to store (see the module docstring).

    `limits` is an IngestLimits: max_attribute_key_chars, max_attribute_value_chars
    and max_value_depth apply (an attribute holding a kvlist or array is at depth 1;
    a kvlist or array deeper than the limit becomes DEPTH_MARKER). Values are
    JSON-ready Python (str, bool, int, float, None, list, dict), as otlp.py makes them.
    """
    return _redact_map(attrs, (limits.max_attribute_key_chars, limits.max_attribute_value_chars, limits.max_value_depth), 0)


def _key_entry(key, key_chars: int) -> tuple[str, bool]:
    entries = _key_entries.setdefault(key_chars, {})
    entry = entries.get(key)
    if entry is None:
        stored = clean_string(key if type(key) is str else str(key), key_chars)
        entry = (stored, is_secret_key(stored))
        if len(entries) >= _KEY_CACHE_MAX:
            entries.clear()
        entries[key] = entry
    return entry


# limits: (max key chars, max value chars, max depth); depth: that of the container
def _redact_map(attrs: Mapping, limits: tuple[int, int, int], depth: int) -> dict:
    key_chars, value_chars, _ = limits
    # One gate over all the map's strings at once: most maps hold no candidate at all,
    # and in the others each string is gated on the cues found (usually one).
    window = value_chars + SCRUB_MARGIN
    strings = [
        value if len(value) <= window else value[:window]
        for value in attrs.values()
        if type(value) is str and len(value) >= MIN_SECRET_CHARS
    ]
    cues = _gate("\n".join(strings)) if strings else []
    entries = _key_entries.get(key_chars) or {}
    out = {}
    for key, value in attrs.items():
        entry = entries.get(key)
        if entry is None:
            entry = _key_entry(key, key_chars)
        key, secret = entry
        out[key] = _stored_value(value, secret, cues, limits, depth)
    return out


def redact_item(key, value, limits: tuple[int, int, int]) -> tuple[str, Any]:
    """(key, value) of one top-level attribute as `redact_attributes` stores it.

    `limits` is (max key chars, max value chars, max depth). A value's fate depends on
    its key and itself alone, so callers may remember the answer for a repeated pair.
    """
    key, secret = _key_entry(key, limits[0])
    cues = ()
    if not secret and type(value) is str and len(value) >= MIN_SECRET_CHARS:
        window = limits[1] + SCRUB_MARGIN
        cues = _gate(value if len(value) <= window else value[:window])
    return key, _stored_value(value, secret, cues, limits, 0)


# cues: those found among the strings of the value's map (see _redact_map)
def _stored_value(value, secret: bool, cues, limits: tuple[int, int, int], depth: int):
    if secret:
        if value is not None and value is not True and value is not False and value != "":
            return REDACTED
        return value
    if type(value) is str:
        value_chars = limits[1]
        if cues and _gate(value[: value_chars + SCRUB_MARGIN], cues):  # the part _store_text scrubs
            return _store_text(value, value_chars, cues)
        if len(value) > value_chars or "\x00" in value or not value.isascii():
            return _store_text(value, value_chars, ())
        return value
    if type(value) is dict or type(value) is list:
        return _redact_nested(value, limits, depth + 1)
    return value


def _redact_list(values: list, limits: tuple[int, int, int], depth: int) -> list:
    out = []
    for value in values:
        if type(value) is str:
            value = _store_text(value, limits[1], None)
        elif type(value) is dict or type(value) is list:
            value = _redact_nested(value, limits, depth + 1)
        out.append(value)
    return out


def _redact_nested(value: dict | list, limits: tuple[int, int, int], depth: int):
    if depth > limits[2]:
        return DEPTH_MARKER
    if type(value) is dict:
        return _redact_map(value, limits, depth)
    return _redact_list(value, limits, depth)
