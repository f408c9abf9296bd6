// The accepting typist's hands and eyes in real VS Code (code-server): commands on stdin, one JSON
// object a line, each answered with one line on stdout. Used by `fimgate bench editor --accepting`
// (fimgate/bench/editor/vscode_typist.py), where the person (fimgate/bench/typist/person.py)
// decides what to do and when: this file only does it, and says what is on screen.
// usage: node typist.js URL OPTIONS_JSON        (OPTIONS_JSON as replay.js's)
// commands: {op: "watch", known, until}  wait until Date.now() >= until, or until the ghost text on
//                                          screen is not `known`: {at, text} (text "" when none)
//           {op: "open", file, text, first} | {op: "move", line, col} | {op: "delete", line, col, length}
//           | {op: "key", text, then} | {op: "paste", text} | {op: "save"}
//           | {op: "accept", kind: "whole"|"words", presses, press_ms, then}   Tab, or accept-word presses
//           | {op: "end", screenshot}
// every answer: {ok, at: Date.now() when done, ...}; the first line, once VS Code is ready: {ok, at}
const readline = require("readline");
const { deleteAt, goTo, openFile, save, shownText, start, typeKey } = require("./page");

const [url, optionsArg] = process.argv.slice(2);
const options = JSON.parse(optionsArg || "{}");
const say = (o) => process.stdout.write(JSON.stringify({ ok: true, at: Date.now(), ...o }) + "\n");

// In the page: resolve with the ghost text as soon as it is not `known` (a DOM change), or at `until`.
function watch(page, known, until) {
  return page.evaluate(
    ([src, known, until]) =>
      new Promise((resolve) => {
        const shown = eval(`(${src})`);
        const norm = () => shown().replace(/\u00a0/g, " "); // the DOM draws spaces as no-break spaces
        const now = norm();
        if (now !== known) return resolve({ at: Date.now(), text: now });
        let timer;
        const obs = new MutationObserver(() => {
          const text = norm();
          if (text !== known) {
            obs.disconnect();
            clearTimeout(timer);
            resolve({ at: Date.now(), text });
          }
        });
        obs.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
        timer = setTimeout(() => {
          obs.disconnect();
          resolve({ at: Date.now(), text: known, timeout: true });
        }, Math.max(0, until - Date.now()));
      }),
    [shownText.toString(), known, until],
  );
}

async function main() {
  let browser, page;
  try {
    ({ browser, page } = await start(url, options));
  } catch (e) {
    process.stdout.write(JSON.stringify({ ok: false, error: String((e && e.stack) || e) }) + "\n");
    if (browser) await browser.close();
    return;
  }
  say({});
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const c = JSON.parse(line);
    try {
      if (c.op === "watch") {
        say(await watch(page, c.known, c.until));
        continue;
      }
      if (c.op === "open") await openFile(page, c.file, c.text, c.first);
      else if (c.op === "move") await goTo(page, c.line, c.col);
      else if (c.op === "delete") await deleteAt(page, c.line, c.col, c.length);
      else if (c.op === "key") await typeKey(page, c.text, c.then);
      else if (c.op === "paste") await page.keyboard.insertText(c.text);
      else if (c.op === "save") await save(page);
      else if (c.op === "accept") {
        if (c.kind === "whole") await page.keyboard.press("Tab");
        else {
          for (let k = 0; k < c.presses; k++) {
            if (k) await page.waitForTimeout(c.press_ms);
            await page.keyboard.press("Control+ArrowRight"); // the extension's acceptNextWord binding
          }
        }
        if (c.then) await page.keyboard.insertText(c.then);
      } else if (c.op === "end") {
        if (c.screenshot) await page.screenshot({ path: c.screenshot });
        say({});
        break;
      } else throw new Error(`unknown command ${c.op}`);
      say({});
    } catch (e) {
      if (c.screenshot) await page.screenshot({ path: c.screenshot }).catch(() => {});
      process.stdout.write(JSON.stringify({ ok: false, error: String((e && e.stack) || e) }) + "\n");
      break;
    }
  }
  await browser.close();
}

main();
