// Pure logic of the extension (no vscode import), unit-tested with mocha.

/** A suggestion the extension was given, and where. */
export interface Shown {
  uri: string;
  prefix: string; // document text before the cursor when the suggestion was made
  lineRest: string; // the rest of the cursor's line after it: a suggestion is only reused before the same text
  completion: string;
  id: string; // the gateway's completion id (acceptance events name it)
  alternatives?: string[]; // for other keys typed here: what the model picks then (from the cursor on)
}

/**
 * The last `capacity` suggestions, most recent first. A lookup answers without a request when the
 * person typed exactly the first characters of one (the rest is still right: the gateway would
 * have continued the same way), or came back to a place one was made (Backspace, retyping).
 */
export class SuggestionCache {
  private entries: Shown[] = [];

  constructor(private readonly capacity = 32) {}

  remember(uri: string, prefix: string, lineRest: string, completion: string, id = "", alternatives: string[] = []): void {
    this.entries = this.entries.filter((e) => !(e.uri === uri && e.prefix === prefix && e.lineRest === lineRest));
    if (completion) {
      this.entries.unshift({ uri, prefix, lineRest, completion, id, alternatives });
      this.entries.length = Math.min(this.entries.length, this.capacity);
    }
  }

  /** Forget this suggestion for this place, if it is still the one remembered there (a first part
   * whose stream was cut short: it would stand for the whole at every later visit). */
  forget(uri: string, prefix: string, lineRest: string, completion: string): void {
    this.entries = this.entries.filter((e) => !(e.uri === uri && e.prefix === prefix && e.lineRest === lineRest && e.completion === completion));
  }

  /** The rest of a remembered suggestion that the text before the cursor leads into, or undefined. */
  lookup(uri: string, prefix: string, lineRest: string): string | undefined {
    return this.find(uri, prefix, lineRest)?.rest;
  }

  /** lookup(), with the suggestion's completion id, and its alternatives where it was made. */
  find(uri: string, prefix: string, lineRest: string): { rest: string; id: string; alternatives: string[] } | undefined {
    for (const e of this.entries) {
      if (e.uri === uri && leadsInto(e, prefix, lineRest)) {
        const here = prefix.length === e.prefix.length;
        return { rest: e.completion.slice(prefix.length - e.prefix.length), id: e.id, alternatives: here ? (e.alternatives ?? []) : [] };
      }
    }
    return undefined;
  }

  clear(): void {
    this.entries = [];
  }
}

/**
 * What was typed since a suggestion still streaming was asked for, when the person typed past
 * what has arrived of it (the rest may still begin with the keys: wait for the stream rather
 * than ask anew); undefined otherwise. Only once some of it has arrived: before its first text
 * there is no telling what it begins with (after an Enter it may end with no text at all), and
 * a new request costs the gateway one step (it stops the superseded one part way).
 */
export function typedPast(askedPrefix: string, askedRest: string, arrived: string, prefix: string, lineRest: string): string | undefined {
  if (!arrived || askedRest !== lineRest || !prefix.startsWith(askedPrefix)) {
    return undefined;
  }
  const typed = prefix.slice(askedPrefix.length);
  return typed.startsWith(arrived) ? typed : undefined;
}

/**
 * Where a prefetch asks (llama.vscode's cacheFutureSuggestion): the document as it would be with
 * the suggestion made at `prefix` (its line's rest `rest`) accepted, and the offset at its end -
 * while the person is still at that place or typing along the suggestion (its ghost text is on
 * screen); undefined once they have moved on or the suggestion is only white space.
 */
export function prefetchPlace(prefix: string, rest: string, suggestion: string, text: string, offset: number): { text: string; offset: number } | undefined {
  const typed = text.slice(0, offset);
  const after = prefix + suggestion;
  if (!suggestion.trim() || !typed.startsWith(prefix) || typed.length >= after.length || !after.startsWith(typed) || lineRest(text, offset) !== rest) {
    return undefined;
  }
  return { text: after + text.slice(offset), offset: after.length };
}

/** Whether the text before the cursor is the suggestion's place plus a strict beginning of it. */
export function leadsInto(e: { prefix: string; lineRest: string; completion: string }, prefix: string, lineRest: string): boolean {
  return (
    e.lineRest === lineRest &&
    prefix.length - e.prefix.length < e.completion.length &&
    prefix.startsWith(e.prefix) &&
    e.completion.startsWith(prefix.slice(e.prefix.length))
  );
}

/**
 * What became of a suggestion shown at `shown`, now that the text before the cursor is `prefix`:
 * still open (the person is typing along it), typed to its end (taken by hand, or by Tab: the
 * accept command reports that), or dismissed (typed over, deleted back, moved away).
 */
export function outcome(
  shown: { prefix: string; lineRest: string; completion: string },
  prefix: string,
  lineRest: string,
): "open" | "completed" | "dismissed" {
  if (leadsInto(shown, prefix, lineRest)) {
    return "open";
  }
  return prefix === shown.prefix + shown.completion ? "completed" : "dismissed";
}

/** The rest of the cursor's line: the text from `offset` to the next newline. */
export function lineRest(text: string, offset: number): string {
  const end = text.indexOf("\n", offset);
  return text.slice(offset, end < 0 ? text.length : end);
}

export interface Settings {
  gatewayUrl: string;
  apiKey: string;
  debounceMs: number;
  maxTokens: number;
  cacheEntries: number;
  maxPredictMs: number;
  minTokenProb: number;
  showPartialAfterMs: number;
  contextChars: number;
  alternatives: number;
}

/** The /v1/completions body for a cursor in a document. */
export function requestBody(uri: string, text: string, offset: number, s: Settings, context: Chunk[] = []): Record<string, unknown> {
  return {
    prompt: text.slice(0, offset),
    suffix: text.slice(offset),
    max_tokens: s.maxTokens,
    ...(s.maxPredictMs > 0 ? { max_predict_ms: s.maxPredictMs } : {}),
    ...(s.minTokenProb > 0 ? { min_token_prob: s.minTokenProb } : {}),
    ...(context.length ? { input_extra: context } : {}),
    ...(s.alternatives > 0 ? { alternatives: s.alternatives } : {}),
    document: uri,
    stream: true,
  };
}

/** One edit of a document, as VS Code reports it (offsets in the text before the edit). */
export interface Change {
  rangeOffset: number;
  rangeLength: number;
  text: string;
}

export const TYPED_MAX_CHARS = 512; // longer insertions are not typing (a paste of a file, a refactoring)

/**
 * Where the caret is after an edit that typing makes - one change: a key, a deletion, an
 * auto-indent, an accepted suggestion, a short paste - so a suggestion can be asked for as soon as
 * the edit is known, not when VS Code asks (its own 50 ms later). `edits`: how far the document's
 * version advanced since the last change event; VS Code hands over many edits as one change when
 * it applies them faster than the extension reads them (a file's text replaced, a refactoring):
 * that is not a person typing. Undefined for other edits (several places at once, long
 * insertions, bursts): those wait for VS Code, whose delay lets a burst settle.
 */
export function caretAfter(changes: readonly Change[], edits = 1): number | undefined {
  if (edits !== 1 || changes.length !== 1 || changes[0].text.length > TYPED_MAX_CHARS) {
    return undefined;
  }
  return changes[0].rangeOffset + changes[0].text.length;
}

/** Text from another file, sent before the current one (the gateway's input_extra). */
export interface Chunk {
  filename: string;
  text: string;
}

/**
 * Files whose text never leaves the editor: not as context, and no completions inside them.
 * Matched against the path's file name (and, for the key folders, its directories), case-insensitively.
 */
export const SECRET_PATTERNS = [
  ".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx",
  "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".npmrc", ".pypirc", ".netrc", ".git-credentials",
  ".htpasswd", "*credential*", "*secret*", ".ssh/*", ".aws/*", ".gnupg/*", ".docker/config.json", ".kube/config",
];

const compiled = new Map<string, RegExp>(); // each glob compiled once (asked on every keystroke)

function globToRegExp(glob: string): RegExp {
  const known = compiled.get(glob);
  if (known) {
    return known;
  }
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*\*\//g, "\u0000")
    .replace(/\*\*/g, "\u0001")
    .replace(/\*/g, "[^/]*")
    .replace(/\?/g, "[^/]")
    .replace(/\u0000/g, "(.*/)?")
    .replace(/\u0001/g, ".*");
  const re = new RegExp(`(^|/)${body}$`, "i");
  compiled.set(glob, re);
  return re;
}

/** Whether a file (a path or file URI) matches a secret pattern or one of `exclude` (globs on its path). */
export function isSecret(path: string, exclude: string[] = []): boolean {
  let p = path.replace(/^file:\/\//, "").replace(/\\/g, "/");
  try {
    p = decodeURIComponent(p);
  } catch {
    // not percent-encoded: match it as it is
  }
  return [...SECRET_PATTERNS, ...exclude].some((g) => globToRegExp(g).test(p));
}

/**
 * A bounded, deduplicated ring of chunks from the files a person worked in, oldest first: the
 * order the gateway shows them in, so a new chunk changes the end of the context, not its start
 * (the gateway reuses what stayed). A chunk overlapping an earlier one of the same file replaces it.
 */
export class ContextRing {
  private chunks: { filename: string; first: number; last: number; text: string }[] = [];

  constructor(
    private readonly maxChars = 3000,
    private readonly maxChunks = 8,
  ) {}

  /** Lines first..last (0-based, inclusive) of a file: `text`. */
  add(filename: string, first: number, last: number, text: string): void {
    if (!text.trim() || this.maxChars <= 0) {
      return;
    }
    text = text.slice(0, this.maxChars);
    this.chunks = this.chunks.filter((c) => !(c.filename === filename && c.first <= last && first <= c.last) && c.text !== text);
    this.chunks.push({ filename, first, last, text });
    let total = this.chunks.reduce((n, c) => n + c.text.length, 0);
    while (this.chunks.length > this.maxChunks || total > this.maxChars) {
      total -= this.chunks.shift()!.text.length;
    }
  }

  /** The chunks to send with a completion in `current` (its own chunks are left out: its text is sent anyway). */
  forDocument(current: string): Chunk[] {
    return this.chunks.filter((c) => c.filename !== current).map((c) => ({ filename: c.filename, text: c.text }));
  }

  clear(): void {
    this.chunks = [];
  }
}

/** The lines around `line` that a chunk holds: `radius` above and below, within the document. */
export function chunkLines(line: number, lineCount: number, radius = 16): [number, number] {
  const first = Math.max(0, Math.min(line - radius, lineCount - 1 - 2 * radius));
  return [first, Math.min(lineCount - 1, first + 2 * radius)];
}

/** Server-sent events as they arrive in pieces: feed() returns the payloads of the events it completed. */
export class SseParser {
  private buffer = "";

  feed(chunk: string): string[] {
    this.buffer += chunk.replace(/\r\n/g, "\n");
    const out: string[] = [];
    let end: number;
    while ((end = this.buffer.indexOf("\n\n")) >= 0) {
      const event = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, ""));
      if (data.length) {
        out.push(data.join("\n"));
      }
    }
    return out;
  }
}

/**
 * A suggestion that arrives as a stream of final pieces (the gateway streams only text no later
 * token can take back). `first` is what to show first: the text so far once `showAfterMs` have
 * passed and some visible text arrived, or the whole suggestion when it ends sooner (showAfterMs
 * < 0: only the whole). The rest keeps arriving; `ended` resolves when the stream is over, with
 * whether the suggestion is complete (false: cancelled or cut off, so it is only a prefix).
 */
export class Growing {
  text = "";
  readonly first: Promise<string>;
  readonly ended: Promise<boolean>;
  private resolveFirst!: (t: string) => void;
  private rejectFirst!: (e: Error) => void;
  private resolveEnded!: (complete: boolean) => void;
  private due: boolean;
  over = false; // the stream ended (complete, cancelled or failed)
  error: Error | undefined; // it failed
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(showAfterMs: number) {
    this.first = new Promise((res, rej) => {
      this.resolveFirst = res;
      this.rejectFirst = rej;
    });
    this.ended = new Promise((res) => (this.resolveEnded = res));
    this.due = showAfterMs === 0;
    if (showAfterMs > 0) {
      this.timer = setTimeout(() => {
        this.due = true;
        this.offer();
      }, showAfterMs);
    }
  }

  add(piece: string): void {
    if (!this.over) {
      this.text += piece;
      this.offer();
    }
  }

  end(complete: boolean): void {
    if (!this.over) {
      this.over = true;
      clearTimeout(this.timer);
      this.resolveFirst(this.text);
      this.resolveEnded(complete);
    }
  }

  fail(e: Error): void {
    if (!this.over) {
      this.over = true;
      this.error = e;
      clearTimeout(this.timer);
      this.rejectFirst(e);
      this.resolveEnded(false);
    }
  }

  private offer(): void {
    if (this.due && this.text.trim()) {
      this.resolveFirst(this.text); // a promise settles once: later calls do nothing
    }
  }
}

/**
 * Which cursor moves get a pre-warm: a selection change with no edit since the last one (typing
 * moves the cursor too, with an edit), to a caret (not a selection), where nothing was asked at
 * this version of the document (a suggestion asked there already prefilled it).
 */
export class MoveWarmer {
  private versions = new Map<string, number>();
  private asked = new Map<string, string>();

  /** A selection changed; true when it was a move without an edit. */
  moved(uri: string, version: number, caret: boolean): boolean {
    const edited = this.versions.get(uri) !== version;
    this.versions.set(uri, version);
    return !edited && caret;
  }

  /** A suggestion or a warm-up was asked for here. */
  ask(uri: string, version: number, offset: number): void {
    this.asked.set(uri, `${version}:${offset}`);
  }

  /** The cursor rested here after a move: warm it up (and remember that it was asked)? */
  warm(uri: string, version: number, offset: number): boolean {
    if (this.asked.get(uri) === `${version}:${offset}`) {
      return false;
    }
    this.ask(uri, version, offset);
    return true;
  }
}

/** Resolve after ms unless cancelled first; says whether to go on. */
export function debounce(ms: number, isCancelled: () => boolean): Promise<boolean> {
  return new Promise((resolve) => setTimeout(() => resolve(!isCancelled()), ms));
}

export type Status =
  | { kind: "active"; last?: string }
  | { kind: "busy" }
  | { kind: "error"; message: string }
  | { kind: "off" };

/** "140 ms, prefix hit": the last suggestion's time to complete and how its prompt was served. */
export function describeUsage(usage: any): string | undefined {
  if (!usage || typeof usage.total_ms !== "number") {
    return undefined;
  }
  const reuse = usage.cached_tokens?.shifted > 0 ? "shifted reuse" : usage.cached_tokens?.prefix > 0 ? "prefix hit" : "full prefill";
  return `${Math.round(usage.total_ms)} ms, ${reuse}`;
}

export function statusText(s: Status): { text: string; tooltip: string } {
  switch (s.kind) {
    case "active":
      return s.last
        ? { text: `$(sparkle) fimgate ${s.last.split(",")[0]}`, tooltip: `fimgate: ready; last suggestion ${s.last}` }
        : { text: "$(sparkle) fimgate", tooltip: "fimgate: ready" };
    case "busy":
      return { text: "$(sync~spin) fimgate", tooltip: "fimgate: completing" };
    case "off":
      return { text: "$(circle-slash) fimgate", tooltip: "fimgate: off (run 'fimgate: Toggle')" };
    case "error":
      return { text: "$(error) fimgate", tooltip: `fimgate: ${s.message}` };
  }
}

/** The gateway's summary for this user, as lines to read: one per language, then all. */
export function summaryLines(summary: any): string[] {
  const line = (name: string, t: any) => {
    const rate = t.acceptance_rate === null || t.acceptance_rate === undefined ? "-" : `${Math.round(100 * t.acceptance_rate)}%`;
    return `${name}: ${t.shown} shown, ${t.accepted} accepted (${rate}, ${t.accepted_chars} characters), ${t.dismissed} dismissed`;
  };
  const langs = Object.entries(summary?.by_language ?? {}).map(([name, t]) => line(name, t));
  return [...langs, line("all", summary?.total ?? { shown: 0, accepted: 0, accepted_chars: 0, dismissed: 0, acceptance_rate: null })];
}

/**
 * What to offer at a suggestion's place: the suggestion, then the gateway's alternatives for other
 * keys (each begins with the character that would be typed; not the suggestion's own first one).
 * VS Code shows the first item the text typed since agrees with: the suggestion here, and after a
 * key that leaves it, the alternative that key begins - at once, before VS Code asks again.
 */
export function offered(completion: string, alternatives: string[]): string[] {
  if (!completion) {
    return []; // (no suggestion here: the model's second choices are not shown in its place)
  }
  const firsts = new Set([completion[0]]);
  const out = [completion];
  for (const a of alternatives) {
    if (a.length >= 2 && !firsts.has(a[0])) {
      firsts.add(a[0]);
      out.push(a);
    }
  }
  return out;
}
