import * as assert from "assert";
import { Growing, SseParser, SuggestionCache, debounce, lineRest, requestBody, statusText } from "../src/logic";

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
});

describe("lineRest", () => {
  it("is the text after the cursor up to the end of its line", () => {
    assert.strictEqual(lineRest("f(x)\ny", 2), "x)");
    assert.strictEqual(lineRest("abc", 3), "");
  });
});

describe("requestBody", () => {
  it("splits the document at the cursor and names the document", () => {
    const body = requestBody("file:///a.py", "abcdef", 2, { gatewayUrl: "", apiKey: "", debounceMs: 0, maxTokens: 7, cacheEntries: 1, maxPredictMs: 0, showPartialAfterMs: 0 });
    assert.deepStrictEqual(body, { prompt: "ab", suffix: "cdef", max_tokens: 7, document: "file:///a.py", stream: true });
    const timed = requestBody("u", "ab", 1, { gatewayUrl: "", apiKey: "", debounceMs: 0, maxTokens: 7, cacheEntries: 1, maxPredictMs: 200, showPartialAfterMs: 0 });
    assert.strictEqual(timed.max_predict_ms, 200);
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
