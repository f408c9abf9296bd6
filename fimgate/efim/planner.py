"""The EFIM planner: turn each editor request into a prompt the KV cache keeps hitting.

Per (user, document) session it keeps an anchor: the prefix window P, the suffix window S and
their fixed prompt tokens. What the person typed since, `inc`, is appended after the anchor:

    fixed ids  =  tokens(template(P, S) up to the open text's last stable pre-token)
    prompt     =  fixed ids + tokens(open tail + inc, last pre-token backed off) ; heal = backed-off text

- EFIM append: the document still holds P right before the cursor (with inc between) and S
  right after it, and inc is within budget. The prompt extends the last one: a prefix hit.
- Re-anchor: anything else (cursor jump, edit outside inc, inc over budget, a context chunk
  added or dropped). The window is recut; old tokens that reappear elsewhere in the new prompt
  become reuse hints. Context chunks are shown in the order the user's requests first carried
  them (chunk_order.py): a client moving a chunk within its ring changes nothing.
- Cold: the session's first request.

Reuse hints come from the session's previous prompt first, then from the prompts its last
anchors were made after (EARLIER_PROMPTS: a key typed before an anchor's prefill ended cancels
it, and the text is then still cached where it was before), then from the last prompts of the
same user's other sessions (HINT_SESSIONS, most recent first): a context chunk is text of a file
the person just left, whose own anchor holds it, and a file opened anew often repeats text of
another. Never from another user's sessions. The plan carries the prompts its hints name
(FimPlan.hint_prompts); EFIM appends carry their anchor's hints, so an anchor whose prefill was
cut short by the next key still takes its moved text from the cache instead of prefilling it.
"""

from __future__ import annotations

import itertools
from collections import Counter, OrderedDict
from dataclasses import dataclass, field, replace

from fimgate.backend.base import FimPlan, HealingConstraint, ReuseClass, ReuseHint, SamplingParams, Tokenizer
from fimgate.efim.chunk_order import ChunkOrder
from fimgate.efim.fragment import tokenize_fragment
from fimgate.efim.postprocess import MARKERS
from fimgate.efim.templates import ContextChunk, FimTemplate, Segment
from fimgate.efim.window import WindowConfig, cut_window

MIN_HINT_TOKENS = 8
# A new anchor mid-line: the cursor's line, up to this many characters, goes after <MID> (see
# line_after_middle). With the partial word at the end of P, before <SUF>, a FIM model cannot be
# healed there and often re-spells it (`for x in e` -> ` enumerate(...)`); after <MID> it is
# text the model continues, as on every later key of the line. Qwen2.5-Coder-0.5B, 500 HumanEval
# holes begun mid-line: docs/benchmarks.md (bench quality --dataset mid-line).
TYPED_LINE_CHARS = 80  # x 3 tokens a character at worst: within WindowConfig.inc_tokens
HINT_SESSIONS = 4  # the user's other sessions searched for reuse hints on a re-anchor or a cold start
EARLIER_PROMPTS = 2  # the session's own prompts before its last anchors, searched after its last prompt
NAMELESS = "nameless:"  # document ids the planner gives requests that name no file
MAX_NAMELESS = 8  # per user
MAX_SESSION_BYTES = 256 << 20  # all sessions' anchors and prompts together (session_bytes); the least recent go first
HEAD_CHARS = 256
CHARS_PER_TOKEN_BOUND = 8  # text longer than budget * this cannot fit the budget: no need to tokenize it


@dataclass(frozen=True)
class EditorState:
    """What the editor knows at a request: the whole document and the cursor (code points)."""

    user_id: str
    document_id: str  # "": the request names no file; CompletionService finds its session by the text
    text: str
    cursor: int
    path: str = ""
    context: tuple[ContextChunk, ...] = ()
    language: str = ""  # the editor's language id, where it says (efim/languages.py)

    def __post_init__(self) -> None:
        if not 0 <= self.cursor <= len(self.text):
            raise ValueError(f"cursor offset {self.cursor} is outside the document (length {len(self.text)})")


@dataclass
class _Session:
    prefix_start: int
    prefix: str  # P: text[prefix_start : anchor cut] (the cursor, or its line's start: line_after_middle)
    suffix: str  # S: text[anchor cursor : suffix end]
    fixed_ids: tuple[int, ...]
    open_tail: str  # open text after its last stable split; inc is appended to it
    path: str
    context: tuple[ContextChunk, ...]  # the chunks shown, in the order shown (ChunkOrder)
    last_prompt: tuple[int, ...] = ()
    earlier: tuple[tuple[int, ...], ...] = ()  # the prompts the last anchors were made after, newest first
    anchor_hints: tuple[ReuseHint, ...] = ()  # the anchor's hints within its fixed ids (EFIM appends carry them)
    hint_prompts: tuple[tuple[str, tuple[int, ...]], ...] = ()  # ... and the prompts they name
    head: str = ""  # the document's first characters, to recognise a nameless document
    num_requests: int = 0
    num_reanchors: int = 0


def session_bytes(s: _Session) -> int:
    """An upper estimate of a session's memory: its token tuples (a Python int and a pointer, 36
    bytes a token, though tuples share their ints) and its text (up to 4 bytes a character)."""
    tokens = len(s.fixed_ids) + len(s.last_prompt) + sum(len(p) for p in s.earlier)
    tokens += sum(len(p) for _, p in s.hint_prompts)
    chars = len(s.prefix) + len(s.suffix) + len(s.open_tail) + len(s.head) + sum(len(c.text) for c in s.context)
    return 36 * tokens + 4 * chars + 1024


@dataclass
class PlannerStats:
    requests: int = 0
    by_class: dict[str, int] = field(default_factory=lambda: {c.value: 0 for c in ReuseClass})


class EfimPlanner:
    def __init__(
        self,
        tokenizer: Tokenizer,
        template: FimTemplate,
        window: WindowConfig = WindowConfig(),
        max_sessions: int = 4096,
        recompute_share: float | None = None,
        hint_sessions: int = HINT_SESSIONS,
        max_bytes: int = MAX_SESSION_BYTES,
        line_after_middle: bool = True,
    ) -> None:
        """recompute_share: suffix-KV correction on re-anchors (FimPlan.recompute_share): None,
        exact classes only; 0, shifted keys re-rotated only; s > 0, s of them recomputed too.
        hint_sessions: how many of the user's other sessions hints may come from (0: only the
        session's own previous prompt). line_after_middle: a new anchor of a <PRE> P <SUF> S <MID>
        template ends P at the start of the cursor's line, and the line's text before the cursor
        goes after <MID>, healed (TYPED_LINE); False: P ends at the cursor (the plain FIM prompt)."""
        self.line_after_middle = line_after_middle and template.layout == "psm"
        self.tok = tokenizer
        self.recompute_share = recompute_share
        self.hint_sessions = hint_sessions
        self.template = template
        self.window = window
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()
        self._bytes: dict[tuple[str, str], int] = {}  # each session's estimate (session_bytes)
        self.held_bytes = 0
        self.chunk_order = ChunkOrder()
        self._sentinel_ids = {}
        for s in template.sentinels():
            tid = tokenizer.token_id(s)
            if tid is None:
                raise ValueError(f"template {template.name!r} needs token {s!r}, which this tokenizer lacks")
            self._sentinel_ids[s] = tid
        # the template's own stops, its sentinels (a model writing <PRE> again is done) and the chat
        # and FIM markers of other families (an Instruct model's turn end): each where it is one token
        fim = template.sentinels() if template.layout in ("psm", "spm") else ()
        names = dict.fromkeys((*template.stop_tokens, *fim, *MARKERS))
        self.stop_token_ids = tuple(i for i in dict.fromkeys(tokenizer.token_id(s) for s in names) if i is not None)
        self.stats = PlannerStats()

    # -- public ----------------------------------------------------------------------------
    def plan(self, state: EditorState, sampling: SamplingParams = SamplingParams()) -> FimPlan:
        key = (state.user_id, state.document_id)
        s = self._sessions.get(key)
        reuse = ReuseClass.EFIM_APPEND
        inc = self._increment(s, state) if s is not None else None
        dyn = None
        if inc is not None:
            dyn = tokenize_fragment(self.tok, s.open_tail + inc)
            if len(dyn.ids) > self.window.inc_tokens:
                dyn = None
        hints = s.anchor_hints if dyn is not None else ()
        if dyn is None:
            prev = s
            s = self._anchor(state, prev)
            dyn = tokenize_fragment(self.tok, s.open_tail + state.text[s.prefix_start + len(s.prefix) : state.cursor])
            reuse = ReuseClass.REANCHOR if prev is not None and prev.last_prompt else ReuseClass.COLD
        prompt = s.fixed_ids + dyn.ids
        if reuse is not ReuseClass.EFIM_APPEND:
            s.hint_prompts = self._hint_sources(key, prev)
            hints = self._hints(s.hint_prompts, prompt)
            fixed = len(s.fixed_ids)
            # (cut at the fixed ids' end: moved text running on into the typed line - an edit just
            # before the cursor - is still the anchor's to take, were its prefill cut short)
            s.anchor_hints = tuple(
                replace(h, num_tokens=min(h.num_tokens, fixed - h.new_start)) for h in hints if h.new_start < fixed
            )
        s.last_prompt = prompt
        s.num_requests += 1
        self._sessions[key] = s
        self._sessions.move_to_end(key)
        self.held_bytes += session_bytes(s) - self._bytes.get(key, 0)
        self._bytes[key] = session_bytes(s)
        while len(self._sessions) > 1 and (len(self._sessions) > self.max_sessions or self.held_bytes > self.max_bytes):
            self._drop(next(iter(self._sessions)))
        self.stats.requests += 1
        self.stats.by_class[reuse.value] += 1
        return FimPlan(
            prompt_ids=prompt,
            user_id=state.user_id,
            session_id=state.document_id,
            sampling=sampling,
            healing=HealingConstraint(dyn.heal),
            stop_token_ids=self.stop_token_ids,
            reuse_class=reuse,
            reuse_hints=hints,
            hint_prompts=s.hint_prompts if hints else (),
            pin_tokens=len(s.fixed_ids),
            recompute_share=self.recompute_share,
        )

    def document_for(self, state: EditorState) -> str:
        """A document id for a request that names no file (llama.vscode, llama.vim, OpenAI clients):
        the user's nameless session this text continues (an EFIM append), else the one whose
        document starts the same way (a cursor jump: a re-anchor with reuse hints), else a new
        one - at most MAX_NAMELESS per user, the least recently used given up first."""
        mine = [(k[1], s) for k, s in self._sessions.items() if k[0] == state.user_id and k[1].startswith(NAMELESS)]
        for doc, s in reversed(mine):  # most recent first
            if self._increment(s, state) is not None:
                return doc
        head = state.text[:HEAD_CHARS]
        for doc, s in reversed(mine):
            if min(len(head), len(s.head)) >= 32 and (head.startswith(s.head) or s.head.startswith(head)):
                return doc
        if len(mine) >= MAX_NAMELESS:
            return mine[0][0]
        used = {doc for doc, _ in mine}
        return next(f"{NAMELESS}{i}" for i in range(MAX_NAMELESS) if f"{NAMELESS}{i}" not in used)

    def forget(self, user_id: str, document_id: str) -> None:
        self._drop((user_id, document_id))

    def _drop(self, key: tuple[str, str]) -> None:
        self._sessions.pop(key, None)
        self.held_bytes -= self._bytes.pop(key, 0)

    def session_anchor(self, user_id: str, document_id: str) -> tuple[str, str] | None:
        """(P, S) of a session's anchor, for inspection."""
        s = self._sessions.get((user_id, document_id))
        return None if s is None else (s.prefix, s.suffix)

    # -- internals -------------------------------------------------------------------------
    def _increment(self, s: _Session, state: EditorState) -> str | None:
        """The text typed since the anchor, or None when the request is not an EFIM append."""
        text, cur = state.text, state.cursor
        anchor_end = s.prefix_start + len(s.prefix)
        if state.path != s.path or cur < anchor_end or not self._same_context(s, state):
            return None
        if not text.startswith(s.prefix, s.prefix_start) or not text.startswith(s.suffix, cur):
            return None
        if cur - anchor_end > self.window.inc_tokens * CHARS_PER_TOKEN_BOUND:
            return None  # far over the budget (a large paste): re-anchor without tokenizing it
        return text[anchor_end:cur]

    def _anchor(self, state: EditorState, old: _Session | None) -> _Session:
        w = cut_window(state.text, state.cursor, self.tok, self.window)
        cut = w.cursor
        if self.line_after_middle:
            line_start = max(w.prefix_start, state.text.rfind("\n", 0, w.cursor) + 1)
            if 0 < w.cursor - line_start <= TYPED_LINE_CHARS and state.text[line_start : w.cursor].strip():
                cut = line_start  # the line's typed text is the first inc: after <MID>, healed
        prefix, suffix = state.text[w.prefix_start : cut], state.text[w.cursor : w.suffix_end]
        context = self.chunk_order.arrange(state.user_id, fit_context(state.context, self.window.context_chars))
        segs, open_text = self.template.render(prefix, suffix, path=state.path, context=context)
        head = tokenize_fragment(self.tok, open_text)
        bos = (self.tok.bos_id,) if getattr(self.tok, "add_bos", False) else ()
        fixed = bos + self._encode(segs) + head.ids
        return _Session(
            prefix_start=w.prefix_start,
            prefix=prefix,
            suffix=suffix,
            fixed_ids=fixed,
            open_tail=head.heal,
            path=state.path,
            context=context,
            head=state.text[:HEAD_CHARS],
            num_requests=old.num_requests if old else 0,
            num_reanchors=(old.num_reanchors + 1) if old else 0,
            earlier=_newest_first(old.last_prompt, old.earlier, EARLIER_PROMPTS) if old else (),
        )

    def _same_context(self, s: _Session, state: EditorState) -> bool:
        """The request shows the session's chunks, in whatever order the client sent them."""
        if state.context == s.context:
            return True
        return Counter(fit_context(state.context, self.window.context_chars)) == Counter(s.context)

    def _encode(self, segs: list[Segment]) -> tuple[int, ...]:
        ids: list[int] = []
        for seg in segs:
            ids.extend([self._sentinel_ids[seg.text]] if seg.special else self.tok.encode(seg.text))
        return tuple(ids)

    def _hint_sources(self, key: tuple[str, str], prev: _Session | None) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(source, prompt) to look for reused text in: the session's previous prompt, the prompts
        its last anchors were made after, then the user's other sessions' last prompts, most
        recent first."""
        own = _newest_first(prev.last_prompt, prev.earlier, 1 + EARLIER_PROMPTS) if prev is not None else ()
        sources = [("" if i == 0 else f"earlier:{i}", p) for i, p in enumerate(own)]
        if self.hint_sessions > 0 and self.recompute_share is not None:  # (without shifted reuse nobody reads them)
            others = ((k[1], s.last_prompt) for k, s in reversed(self._sessions.items()) if k[0] == key[0] and k != key)
            sources += itertools.islice((o for o in others if o[1]), self.hint_sessions)
        return tuple(sources)

    @staticmethod
    def _hints(sources: tuple[tuple[str, tuple[int, ...]], ...], new: tuple[int, ...]) -> tuple[ReuseHint, ...]:
        """Runs of each source's prompt that reappear in the new one, after the prefix it shares
        with the first source. Each source is searched on its own (where two hold the same text,
        which one still has it cached is for the backend to see), so hints of different sources
        may cover the same new positions; one source's never overlap.

        Linear time in the prompts: every MIN_HINT_TOKENS-gram of a source is indexed (its first
        occurrence), the new prompt is scanned left to right, and each gram found is extended as
        far as the two prompts agree. Runs may come from anywhere in a source (a moved block is
        found whatever the order)."""
        if not sources:
            return ()
        lcp = common_prefix_len(sources[0][1], new)
        k = MIN_HINT_TOKENS
        hints = []
        for n_src, (name, old) in enumerate(sources):
            first: dict[tuple[int, ...], int] = {}
            for i in range(lcp if n_src == 0 else 0, len(old) - k + 1):
                first.setdefault(old[i : i + k], i)
            j = lcp
            while j <= len(new) - k:
                i = first.get(new[j : j + k])
                if i is None:
                    j += 1
                    continue
                n = k
                while i + n < len(old) and j + n < len(new) and old[i + n] == new[j + n]:
                    n += 1
                hints.append(ReuseHint(old_start=i, new_start=j, num_tokens=n, source=name))
                j += n
        return tuple(hints)


def _newest_first(last: tuple[int, ...], earlier: tuple[tuple[int, ...], ...], n: int) -> tuple[tuple[int, ...], ...]:
    """`last` then `earlier`, without empty or repeated prompts, at most n."""
    out: list[tuple[int, ...]] = []
    for p in (last, *earlier):
        if p and p not in out:
            out.append(p)
    return tuple(out[:n])


def fit_context(chunks: tuple[ContextChunk, ...], budget_chars: int) -> tuple[ContextChunk, ...]:
    """The chunks that fit the budget, newest (last) first, in their original order; a chunk
    that alone is over the budget is left out. Bounded before any tokenization."""
    kept, used = [], 0
    for c in reversed(chunks):
        size = len(c.path) + len(c.text)
        if used + size <= budget_chars:
            kept.append(c)
            used += size
    return tuple(reversed(kept))


def common_prefix_len(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
