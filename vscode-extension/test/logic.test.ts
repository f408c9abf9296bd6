import * as assert from "assert";
import { SuggestionCache, debounce, requestBody, statusText } from "../src/logic";

describe("SuggestionCache", () => {
  it("keeps the rest of a suggestion while the person types through it", () => {
    const c = new SuggestionCache();
    c.remember("file:///a.py", "x = ", "compute(1, 2)");
    assert.strictEqual(c.lookup("file:///a.py", "x = comp"), "ute(1, 2)");
    assert.strictEqual(c.lookup("file:///a.py", "x = compX"), undefined); // typed off the suggestion
    assert.strictEqual(c.lookup("file:///b.py", "x = comp"), undefined); // another document
    assert.strictEqual(c.lookup("file:///a.py", "x = compute(1, 2)"), undefined); // typed all of it
  });
});

describe("requestBody", () => {
  it("splits the document at the cursor and names the document", () => {
    const body = requestBody("file:///a.py", "abcdef", 2, { gatewayUrl: "", apiKey: "", debounceMs: 0, maxTokens: 7 });
    assert.deepStrictEqual(body, { prompt: "ab", suffix: "cdef", max_tokens: 7, document: "file:///a.py", stream: false });
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
