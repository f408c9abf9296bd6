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
const fs = require("fs");
const { deleteAt, goTo, openFile, save, shownText, start, typeKey } = require("./page");

const [url, stepsPath, outPath, optionsArg] = process.argv.slice(2);
const options = JSON.parse(optionsArg || "{}");

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

async function main() {
  const steps = JSON.parse(fs.readFileSync(stepsPath, "utf-8"));
  const keys = [];
  const result = { ok: false, keys };
  let browser, page;
  try {
    ({ browser, page } = await start(url, options));
    for (const s of steps) {
      const started = Date.now();
      if (s.op === "open") {
        await openFile(page, s.file, s.text, s.first);
      } else if (s.op === "move") {
        await goTo(page, s.line, s.col);
      } else if (s.op === "delete") {
        await deleteAt(page, s.line, s.col, s.length);
      } else if (s.op === "save") {
        await save(page);
      }
      if (s.op === "open" || s.op === "move" || s.op === "delete") {
        await page.waitForTimeout(Math.max(0, (s.wait_ms || 0) - (Date.now() - started)));
      } else if (s.op === "key" || s.op === "paste") {
        const t0 = Date.now();
        await watch(page, t0);
        if (s.op === "paste") await page.keyboard.insertText(s.text);
        else await typeKey(page, s.text, s.then);
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
    if (page) await page.screenshot({ path: outPath.replace(/\.json$/, "-failure.png") }).catch(() => {});
  } finally {
    if (browser) await browser.close();
  }
  fs.writeFileSync(outPath, JSON.stringify(result));
}

main();
