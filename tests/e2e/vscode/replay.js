// Replay a person's keystrokes into real VS Code (code-server) and record, for every key, when
// ghost text was drawn (or that none was before the next key) and what it said. Used by
// `fimgate bench editor` (fimgate/bench/editor/vscode.py), which prepares the steps from a trace.
// usage: node replay.js URL STEPS_JSON OUT_JSON [OPTIONS_JSON]
// steps: {op: "open", file, text, first, wait_ms} | {op: "move", line, col, wait_ms}
//        | {op: "delete", line, col, length, wait_ms} | {op: "key", text, then?, wait_ms} | {op: "paste", text, wait_ms}
//        | {op: "save"}   (line, col 1-based; wait_ms: the person's pause until the next step, from its start;
//        then: the editor's auto-indent after the key, inserted with it)
// OPTIONS_JSON: {"status": the extension's status bar text, "openFirst": a top-level file to open first,
//                "closeTab": the title of a page the extension opens on its first start, to wait for and close}
const { chromium } = require("playwright-core");
const fs = require("fs");

const [url, stepsPath, outPath, optionsArg] = process.argv.slice(2);
const options = JSON.parse(optionsArg || "{}");
// VS Code draws a suggestion's text on the cursor line as "after" decorations, and its further
// lines in a view zone (.ghost-text spans, a parent per line)

// In the page: the ghost text on screen now ("" when none)
function shownText() {
  const visible = (sel) => [...document.querySelectorAll(sel)].filter((e) => e.offsetParent !== null);
  const inline = visible(".ghost-text-decoration, .ghost-text-decoration-preview").map((e) => e.textContent).join("");
  const lines = [...new Set(visible(".ghost-text").map((e) => e.parentElement))].map((e) => e.textContent);
  return lines.length ? [inline, ...lines].join("\n") : inline;
}

// In the page: from now on, note Date.now() and the ghost text at the first DOM change that leaves
// ghost text with content on screen (what the person sees, when VS Code drew it).
function watch(page, t0) {
  return page.evaluate(
    ([src, t0]) => {
      const shown = eval(`(${src})`);
      if (window.__obs) window.__obs.disconnect();
      window.__shownText = shown;
      window.__seen = null;
      window.__obs = new MutationObserver(() => {
        const text = shown();
        if (Date.now() >= t0 && text.trim()) {
          window.__seen = { at: Date.now(), text };
          window.__obs.disconnect();
        }
      });
      window.__obs.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    },
    [shownText.toString(), t0],
  );
}

const seen = (page) => page.evaluate(() => ({ seen: window.__seen, now: window.__shownText() }));

async function quickOpen(page, name) {
  await page.keyboard.press("Control+P");
  await page.waitForSelector(".quick-input-widget input", { timeout: 30000 });
  await page.keyboard.type(name, { delay: 10 });
  await page.waitForTimeout(800);
  await page.keyboard.press("Enter");
  await page.waitForSelector(".monaco-editor .view-lines", { timeout: 60000 });
  await page.waitForTimeout(1000);
}

async function goTo(page, line, col) {
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+G");
  await page.waitForSelector(".quick-input-widget input", { timeout: 10000 });
  await page.keyboard.type(`${line}:${col}`);
  await page.keyboard.press("Enter");
}

async function main() {
  const steps = JSON.parse(fs.readFileSync(stepsPath, "utf-8"));
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-dev-shm-usage"],
  });
  // (the clipboard: a file's new text is pasted in, one edit, as a person's editor loads it)
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, permissions: ["clipboard-read", "clipboard-write"] });
  const keys = [];
  const result = { ok: false, keys };
  try {
    await page.goto(url, { waitUntil: "domcontentloaded", timeout: 120000 });
    await page.waitForSelector(".monaco-workbench", { timeout: 120000 });
    if (options.openFirst) {
      // only to activate the extension (its language): a click in the Explorer, no focus needed
      await page.locator(".explorer-folders-view .monaco-list-row", { hasText: options.openFirst }).first().click();
    }
    await page.locator(".statusbar-item", { hasText: options.status || "fimgate" }).first().waitFor({ timeout: 120000 });
    if (options.closeTab) {
      const tab = page.locator(".tabs-container .tab", { hasText: options.closeTab });
      await tab.first().waitFor({ timeout: 120000 });
      await tab.first().click({ button: "middle" });
      await tab.first().waitFor({ state: "detached", timeout: 30000 });
    }
    for (const s of steps) {
      const started = Date.now();
      if (s.op === "open") {
        await quickOpen(page, s.file);
        await page.locator(".monaco-editor .view-lines").first().click();
        if (!s.first) {
          // the file's text as the trace has it now: pasted, one edit (typed in with insertText,
          // VS Code applies a large file character by character and freezes for seconds, and the
          // keys that follow would land late, in a burst)
          await page.evaluate((t) => navigator.clipboard.writeText(t), s.text);
          await page.keyboard.press("Control+A");
          await page.keyboard.press("Control+V");
        }
      } else if (s.op === "move") {
        await goTo(page, s.line, s.col);
      } else if (s.op === "delete") {
        await goTo(page, s.line, s.col);
        for (let k = 0; k < s.length; k++) await page.keyboard.press("Shift+ArrowRight");
        await page.keyboard.press("Delete");
      } else if (s.op === "save") {
        await page.keyboard.press("Escape");
        await page.keyboard.press("Control+S");
        await page.waitForTimeout(500);
      }
      if (s.op === "open" || s.op === "move" || s.op === "delete") {
        await page.waitForTimeout(Math.max(0, (s.wait_ms || 0) - (Date.now() - started)));
      } else if (s.op === "key" || s.op === "paste") {
        const t0 = Date.now();
        await watch(page, t0);
        if (s.op === "paste" || s.text === "\t") await page.keyboard.insertText(s.text);
        else if (s.text === "\n") await page.keyboard.press("Enter");
        else await page.keyboard.type(s.text);
        if (s.then) await page.keyboard.insertText(s.then); // the editor's auto-indent, part of this key
        await page.waitForTimeout(Math.max(0, s.wait_ms - (Date.now() - t0)));
        if (s.op === "key") {
          const { seen: first, now } = await seen(page);
          keys.push({ at: t0, window_ms: s.wait_ms, shown_ms: first ? first.at - t0 : null, text: now.trim() ? now : first ? first.text : "" });
        }
      }
    }
    await page.screenshot({ path: outPath.replace(/\.json$/, ".png") });
    result.ok = true;
  } catch (e) {
    result.error = String((e && e.stack) || e);
    await page.screenshot({ path: outPath.replace(/\.json$/, "-failure.png") }).catch(() => {});
  } finally {
    await browser.close();
  }
  fs.writeFileSync(outPath, JSON.stringify(result));
}

main();
