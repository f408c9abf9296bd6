import * as assert from "assert";
import { ContextRing, Growing, TYPED_MAX_CHARS, caretAfter, MoveWarmer, SseParser, chunkLines, describeUsage, isSecret, outcome, summaryLines, SuggestionCache, debounce, lineRest, offered, prefetchPlace, requestBody, statusText, typedPast } from "../src/logic";

describe("SuggestionCache", () => {
  it("keeps the rest of a suggestion while the person types through it", () => {
    const c = new SuggestionCache();
    c.remember("file:///a.py", "x = ", "", "compute(1, 2)");
    assert.strictEqual(c.lookup("file:///a.py", "x = comp", ""), "ute(1, 2)");
    assert.strictEqual(c.lookup("file:///a.py", "x = compX", ""), undefined); // typed off the suggestion
    assert.strictEqual(c.lookup("file:///b.py", "x = comp", ""), undefined); // another document
    assert.strictEqual(c.lookup("file:///a.py", "x = compute(1, 2)", ""), undefined); // typed all of it
    assert.strictEqual(c.lookup("file:///a.py", "x = comp", ")"), undefined); // other text after the cursor
  });

  it("answers coming back to an earlier place, most recent suggestion first, within its capacity", () => {
    const c = new SuggestionCache(2);
    c.remember("u", "return fibo", "", "nacci(n - 1)");
    c.remember("u", "return fibn", "", "(n)");
    assert.strictEqual(c.lookup("u", "return fibo", ""), "nacci(n - 1)"); // Backspace, then the same key
    assert.strictEqual(c.lookup("u", "return fibn", ""), "(n)");
    c.remember("u", "return fibo", "", "nacci(n)"); // a newer suggestion for the same place replaces it
    assert.strictEqual(c.lookup("u", "return fibona", ""), "cci(n)");
    c.remember("u", "return fiba", "", "d()"); // capacity 2: the oldest entry goes
    assert.strictEqual(c.lookup("u", "return fibn", ""), undefined);
    c.remember("u", "return fiba", "", ""); // an empty answer forgets the place
    assert.strictEqual(c.lookup("u", "return fiba", ""), undefined);
  });

  it("forgets a first part whose stream was cut short, but not a newer suggestion for the place", () => {
    const c = new SuggestionCache();
    c.remember("u", "return fibo", "", "nacci"); // the first part, shown while the rest streams
    c.forget("u", "return fibo", "", "nacci"); // then the stream was superseded
    assert.strictEqual(c.lookup("u", "return fibo", ""), undefined); // the next visit asks again
    c.remember("u", "return fibo", "", "nacci(n - 1)"); // a newer, whole suggestion there
    c.forget("u", "return fibo", "", "nacci"); // the old stream's late end leaves it alone
    assert.strictEqual(c.lookup("u", "return fibo", ""), "nacci(n - 1)");
  });
});

describe("alternatives", () => {
  it("come with a suggestion where it was made, not once the person typed into it", () => {
    const c = new SuggestionCache();
    c.remember("u", "x = ", "", "compute(1)", "id1", ["self.x", "None"]);
    assert.deepStrictEqual(c.find("u", "x = ", ""), { rest: "compute(1)", id: "id1", alternatives: ["self.x", "None"] });
    assert.deepStrictEqual(c.find("u", "x = co", "")?.alternatives, []); // typed along the suggestion: its own rest only
  });

  it("are offered after the suggestion, one per first character, never its own, never alone", () => {
    assert.deepStrictEqual(offered("compute(1)", ["self.x", "cache", "None", "Nothing", "s"]), ["compute(1)", "self.x", "None"]);
    assert.deepStrictEqual(offered("", ["self.x"]), []); // no suggestion here: no second choices in its place
  });
});

describe("typedPast", () => {
  it("waits for a stream the keys go on from, once some of it has arrived", () => {
    assert.strictEqual(typedPast("x = ", "", "comp", "x = compu", ""), "compu"); // typed past "comp": wait
    assert.strictEqual(typedPast("x = ", "", "comp", "x = co", ""), undefined); // within it: the cache answers
    assert.strictEqual(typedPast("x = ", "", "comp", "x = cx", ""), undefined); // typed off it: ask anew
    assert.strictEqual(typedPast("x = ", "", "comp", "x = compu", ")"), undefined); // another line rest
    assert.strictEqual(typedPast("x = ", "", "", "x = c", ""), undefined); // nothing arrived yet: ask anew
  });
});

describe("prefetchPlace", () => {
  it("asks at the end of the suggestion, as if accepted, while its ghost text is on screen", () => {
    const text = "def f(x):\n    ret\n";
    const at = text.indexOf("ret") + 3;
    assert.deepStrictEqual(prefetchPlace(text.slice(0, at), "", "urn x", text, at), { text: "def f(x):\n    return x\n", offset: at + 5 });
    // typed along it: the same place
    const along = text.slice(0, at) + "ur" + text.slice(at);
    assert.deepStrictEqual(prefetchPlace(text.slice(0, at), "", "urn x", along, at + 2), { text: "def f(x):\n    return x\n", offset: at + 5 });
  });
  it("asks nothing once the person has left the suggestion", () => {
    const text = "x = retz";
    assert.strictEqual(prefetchPlace("x = ret", "", "urn", text, text.length), undefined); // typed something else
    assert.strictEqual(prefetchPlace("x = ", "", "   ", "x = ", 4), undefined); // white space only
    assert.strictEqual(prefetchPlace("x = ", "", "1", "x = )", 4), undefined); // the line after the cursor changed
  });
});

describe("lineRest", () => {
  it("is the text after the cursor up to the end of its line", () => {
    assert.strictEqual(lineRest("f(x)\ny", 2), "x)");
    assert.strictEqual(lineRest("abc", 3), "");
  });
});

describe("requestBody", () => {
  it("splits the document at the cursor and names the document", () => {
    const body = requestBody("file:///a.py", "abcdef", 2, { gatewayUrl: "", apiKey: "", debounceMs: 0, maxTokens: 7, cacheEntries: 1, maxPredictMs: 0, minTokenProb: 0, showPartialAfterMs: 0, contextChars: 0, alternatives: 0 });
    assert.deepStrictEqual(body, { prompt: "ab", suffix: "cdef", max_tokens: 7, document: "file:///a.py", stream: true });
    const timed = requestBody("u", "ab", 1, { gatewayUrl: "", apiKey: "", debounceMs: 0, maxTokens: 7, cacheEntries: 1, maxPredictMs: 200, minTokenProb: 0.5, showPartialAfterMs: 0, contextChars: 0, alternatives: 8 });
    assert.strictEqual(timed.max_predict_ms, 200);
    assert.strictEqual(timed.min_token_prob, 0.5);
    assert.strictEqual(timed.alternatives, 8);
  });
});

describe("debounce", () => {
  it("goes on only when nothing cancelled it meanwhile", async () => {
    assert.strictEqual(await debounce(5, () => false), true);
    assert.strictEqual(await debounce(5, () => true), false);
  });
});

describe("statusText", () => {
  it("shows errors with their message", () => {
    assert.match(statusText({ kind: "error", message: "cannot reach" }).tooltip, /cannot reach/);
  });
});

describe("SseParser", () => {
  it("returns each event's data once the event is complete, however the bytes were split", () => {
    const p = new SseParser();
    assert.deepStrictEqual(p.feed('data: {"a"'), []);
    assert.deepStrictEqual(p.feed(": 1}\n\ndata: [DO"), ['{"a": 1}']);
    assert.deepStrictEqual(p.feed("NE]\r\n\r\n"), ["[DONE]"]);
  });
});

describe("Growing", () => {
  it("shows the first visible text at once with showAfterMs 0, and keeps the rest coming", async () => {
    const g = new Growing(0);
    g.add("  "); // nothing to see yet
    g.add("self");
    g.add(".x");
    assert.strictEqual(await g.first, "  self");
    g.end(true);
    assert.strictEqual(await g.ended, true);
    assert.strictEqual(g.text, "  self.x");
  });

  it("waits showAfterMs before showing a part, and shows the whole if it ends sooner", async () => {
    const late = new Growing(30);
    late.add("ret");
    const early = await Promise.race([late.first, new Promise((r) => setTimeout(() => r("not yet"), 10))]);
    assert.strictEqual(early, "not yet");
    late.add("urn x");
    assert.strictEqual(await late.first, "return x");
    const quick = new Growing(1000);
    quick.add("x)");
    quick.end(true);
    assert.strictEqual(await quick.first, "x)");
  });

  it("with showAfterMs -1 shows only the whole; a failure rejects; a cancelled one is not complete", async () => {
    const whole = new Growing(-1);
    whole.add("a");
    setTimeout(() => {
      whole.add("b");
      whole.end(false);
    }, 5);
    assert.strictEqual(await whole.first, "ab");
    assert.strictEqual(await whole.ended, false);
    const broken = new Growing(0);
    broken.fail(new Error("gateway down"));
    await assert.rejects(broken.first, /gateway down/);
  });
});

describe("isSecret", () => {
  it("matches secret files by name, in key folders, and the person's own globs", () => {
    for (const p of ["/w/.env", "/w/.env.local", "/w/prod.env", "/w/certs/server.pem", "/w/tls.key", "/home/u/.ssh/id_ed25519",
      "/home/u/.aws/credentials", "/w/.npmrc", "file:///w/config/client_secret.json", "/w/app/Credentials.yml", "C:\\w\\.env"]) {
      assert.strictEqual(isSecret(p), true, p);
    }
    for (const p of ["/w/app.py", "/w/src/environment.ts", "/w/keyboard.py", "/w/tokenizer.py", "/w/docs/env.md"]) {
      assert.strictEqual(isSecret(p), false, p);
    }
    assert.strictEqual(isSecret("/w/vendor/lib/a.py", ["**/vendor/**"]), true);
    assert.strictEqual(isSecret("/w/src/a.py", ["**/vendor/**"]), false);
  });
});

describe("ContextRing", () => {
  it("keeps chunks oldest first, replaces overlapping ones of a file, and stays within its budget", () => {
    const r = new ContextRing(100, 3);
    r.add("a.py", 0, 10, "A".repeat(30));
    r.add("b.py", 0, 10, "B".repeat(30));
    assert.deepStrictEqual(r.forDocument("c.py").map((c) => c.filename), ["a.py", "b.py"]);
    r.add("a.py", 5, 15, "a".repeat(30)); // overlaps a.py's chunk: replaces it, now newest
    assert.deepStrictEqual(r.forDocument("c.py").map((c) => c.text[0]), ["B", "a"]);
    assert.deepStrictEqual(r.forDocument("a.py").map((c) => c.filename), ["b.py"]); // the current file's own chunks stay out
    r.add("c.py", 0, 10, "C".repeat(50)); // over 100 characters: the oldest goes
    assert.deepStrictEqual(r.forDocument("x").map((c) => c.text[0]), ["a", "C"]);
    r.add("d.py", 0, 1, "   "); // nothing to show: not added
    assert.strictEqual(r.forDocument("x").length, 2);
    const off = new ContextRing(0);
    off.add("a.py", 0, 1, "x = 1");
    assert.deepStrictEqual(off.forDocument("b.py"), []);
  });

  it("takes the lines around the cursor, moved inside the document", () => {
    assert.deepStrictEqual(chunkLines(50, 200, 16), [34, 66]);
    assert.deepStrictEqual(chunkLines(2, 200, 16), [0, 32]);
    assert.deepStrictEqual(chunkLines(199, 200, 16), [167, 199]);
    assert.deepStrictEqual(chunkLines(3, 10, 16), [0, 9]);
  });
});

describe("outcome", () => {
  const shown = { prefix: "x = ", lineRest: "", completion: "compute(1)" };
  it("is open while the person types along, completed at its end, dismissed otherwise", () => {
    assert.strictEqual(outcome(shown, "x = ", ""), "open");
    assert.strictEqual(outcome(shown, "x = comp", ""), "open");
    assert.strictEqual(outcome(shown, "x = compute(1)", ""), "completed"); // Tab (the command reports it) or typed
    assert.strictEqual(outcome(shown, "x = compX", ""), "dismissed"); // typed over
    assert.strictEqual(outcome(shown, "x =", ""), "dismissed"); // deleted back
    assert.strictEqual(outcome(shown, "x = comp", ")"), "dismissed"); // elsewhere
  });
});

describe("describeUsage", () => {
  it("says the time and how the prompt was served", () => {
    assert.strictEqual(describeUsage({ total_ms: 141.6, cached_tokens: { prefix: 300, shifted: 0 } }), "142 ms, prefix hit");
    assert.strictEqual(describeUsage({ total_ms: 90, cached_tokens: { prefix: 3, shifted: 200 } }), "90 ms, shifted reuse");
    assert.strictEqual(describeUsage({ total_ms: 900, cached_tokens: { prefix: 0, shifted: 0 } }), "900 ms, full prefill");
    assert.strictEqual(describeUsage(undefined), undefined);
  });
});

describe("summaryLines", () => {
  it("reads the gateway's summary, a line per language and one for all", () => {
    const t = { shown: 4, accepted: 1, accepted_chars: 27, dismissed: 3, acceptance_rate: 0.25 };
    assert.deepStrictEqual(summaryLines({ total: t, by_language: { python: t } }), [
      "python: 4 shown, 1 accepted (25%, 27 characters), 3 dismissed",
      "all: 4 shown, 1 accepted (25%, 27 characters), 3 dismissed",
    ]);
    assert.deepStrictEqual(summaryLines({}), ["all: 0 shown, 0 accepted (-, 0 characters), 0 dismissed"]);
  });
});

describe("MoveWarmer", () => {
  it("warms a place the cursor moved to without an edit, once, and not where a suggestion was asked", () => {
    const m = new MoveWarmer();
    assert.strictEqual(m.moved("u", 1, true), false); // the first event of a document: nothing known yet
    assert.strictEqual(m.moved("u", 2, true), false); // typing: the version changed with the move
    assert.strictEqual(m.moved("u", 2, false), false); // a selection, not a caret
    assert.strictEqual(m.moved("u", 2, true), true); // a click or Go to Line: no edit since
    assert.strictEqual(m.warm("u", 2, 40), true);
    assert.strictEqual(m.warm("u", 2, 40), false); // already warmed there
    m.ask("u", 2, 90); // a suggestion was asked at 90
    assert.strictEqual(m.warm("u", 2, 90), false);
    assert.strictEqual(m.warm("u", 3, 90), true); // the document changed since
  });
});

describe("caretAfter", () => {
  it("puts the caret after a typed key, an auto-indent or a short paste, at a deletion's start, and says nothing of other edits", () => {
    assert.strictEqual(caretAfter([{ rangeOffset: 10, rangeLength: 0, text: "x" }]), 11); // a key
    assert.strictEqual(caretAfter([{ rangeOffset: 10, rangeLength: 0, text: "\n    " }]), 15); // Enter, indented
    assert.strictEqual(caretAfter([{ rangeOffset: 9, rangeLength: 1, text: "" }]), 9); // Backspace
    assert.strictEqual(caretAfter([{ rangeOffset: 4, rangeLength: 3, text: "ab" }]), 6); // a selection typed over
    const twoCursors = [
      { rangeOffset: 4, rangeLength: 0, text: "a" },
      { rangeOffset: 20, rangeLength: 0, text: "a" },
    ];
    assert.strictEqual(caretAfter(twoCursors), undefined);
    assert.strictEqual(caretAfter([]), undefined);
    // a burst VS Code applied faster than the extension read it (a file's text replaced), handed over as one change
    assert.strictEqual(caretAfter([{ rangeOffset: 0, rangeLength: 0, text: "abc" }], 3), undefined);
    assert.strictEqual(caretAfter([{ rangeOffset: 0, rangeLength: 0, text: "a" }], 0), undefined); // the first event seen
    assert.strictEqual(caretAfter([{ rangeOffset: 0, rangeLength: 0, text: "x".repeat(TYPED_MAX_CHARS + 1) }]), undefined);
  });
});
