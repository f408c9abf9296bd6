// Drive real VS Code (code-server) in Chromium with playwright-core: open a Python file, wait
// for the fimgate extension to show it is active, type, see ghost text, accept it with Tab,
// save, and measure keystroke -> ghost text. Prints one JSON line of results.
// usage: node drive.js URL FILE_NAME OUT_DIR TRIALS [OPTIONS_JSON]
// OPTIONS_JSON: {"status": text of the extension's status bar item (default "fimgate"),
//                "openFirst": a file (or a list of files) to open before FILE_NAME, in turn (an extension that
//                             activates on its language; files whose text may become context),
//                "closeTab": the title of a page the extension opens on its first start, to wait for and close}
const { chromium } = require("playwright-core");
const fs = require("fs");
const path = require("path");

const [url, fileName, outDir, trialsArg] = process.argv.slice(2);
const trials = parseInt(trialsArg || "30", 10);
const options = JSON.parse(process.argv[6] || "{}");

const GHOST = ".ghost-text-decoration, .ghost-text-decoration-preview, .ghost-text";

// Watch, in the page, for the first DOM change that leaves ghost text with content on screen, and
// keep Date.now() of it: the time VS Code drew it, not when a poll noticed it (playwright's waitFor
// polls at up to 500 ms intervals, which added up to ~0.5 s to every reading). Installed once no
// ghost text is left on screen, before the key goes down; ghostShownAt gives the time or null.
async function watchGhost(page, timeoutMs) {
  await clearGhost(page);
  await page.evaluate(
    ([sel, timeoutMs]) => {
      window.__ghostShownAt = new Promise((resolve) => {
        const shown = () => [...document.querySelectorAll(sel)].some((e) => e.offsetParent !== null && e.textContent);
        const obs = new MutationObserver(() => {
          if (shown()) {
            obs.disconnect();
            resolve(Date.now());
          }
        });
        obs.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
        setTimeout(() => {
          obs.disconnect();
          resolve(null);
        }, timeoutMs);
      });
    },
    [GHOST, timeoutMs],
  );
}

// Dismiss what ghost text is on screen. A client that asks on every change (llama.vscode does, on
// the Backspace too) may draw a suggestion after the Escape that was meant to clear the screen, and
// it stays until the next key: press Escape again until the screen stays clear for a moment.
async function clearGhost(page) {
  const clear = () => page.evaluate((sel) => ![...document.querySelectorAll(sel)].some((e) => e.offsetParent !== null && e.textContent), GHOST);
  for (let k = 0; k < 40; k++) {
    if (await clear()) {
      await page.waitForTimeout(100);
      if (await clear()) return;
    }
    await page.keyboard.press("Escape");
    await page.waitForTimeout(250);
  }
  throw new Error("ghost text stays on screen after 40 presses of Escape");
}

const ghostShownAt = (page) => page.evaluate(() => window.__ghostShownAt);

// Open a top-level file of the workspace from the Explorer (a click, not Quick Open: a welcome page
// or the chat view may hold the keyboard focus), then put the focus in its editor.
async function openFromExplorer(page, name, focus = true) {
  await page.keyboard.press("Escape");
  await page.locator(".explorer-folders-view .monaco-list-row", { hasText: name }).first().click();
  await page.waitForTimeout(1500);
  if (focus) await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().click();
}

async function main() {
  fs.mkdirSync(outDir, { recursive: true });
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const result = { ok: false };
  try {
    await page.goto(url, { waitUntil: "domcontentloaded", timeout: 120000 });
    await page.waitForSelector(".monaco-workbench", { timeout: 120000 });
    await page.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 120000 });
    // only to activate the extension: no focus needed (its first-start page may replace the editor meanwhile)
    for (const name of [].concat(options.openFirst || [])) await openFromExplorer(page, name, false);
    // the extension's status bar item says it is active: before that, keystrokes can be lost
    const status = page.locator(".statusbar-item", { hasText: options.status || "fimgate" });
    await status.first().waitFor({ timeout: 120000 });
    if (options.closeTab) {
      const tab = page.locator(".tabs-container .tab", { hasText: options.closeTab });
      await tab.first().waitFor({ timeout: 120000 });
      await tab.first().click({ button: "middle" });
      await tab.first().waitFor({ state: "detached", timeout: 30000 });
    }
    await page.waitForTimeout(2000); // an extension's first-start page opens about now
    await openFromExplorer(page, fileName);
    // go to the marked line: the end of "    return fib" (line 4)
    await page.keyboard.press("Control+G");
    await page.keyboard.type("4", { delay: 20 });
    await page.keyboard.press("Enter");
    await page.keyboard.press("End");
    const ghost = page.locator(GHOST);
    const latencies = [];
    const keyAt = []; // epoch ms of each key, to line up with a server's log
    let firstGhost = null;
    for (let i = 0; i < trials; i++) {
      await page.keyboard.press("Escape");
      const ch = "onacci"[i % 6];
      await watchGhost(page, 15000);
      const t0 = Date.now();
      keyAt.push(t0);
      await page.keyboard.type(ch);
      const at = await ghostShownAt(page);
      latencies.push(at === null ? null : at - t0);
      if (at !== null && firstGhost === null) {
        firstGhost = (await ghost.first().textContent()) || "";
        await page.screenshot({ path: path.join(outDir, "ghost-text.png") });
      }
      await page.keyboard.press("Escape");
      await page.keyboard.press("Backspace");
    }
    // the real thing: type, see ghost text, press Tab, the text lands in the file. Let the last
    // trial's re-triggered suggestion settle first, and read the ghost text once VS Code has
    // stopped redrawing it (typing through a shown suggestion redraws it in parts).
    await page.waitForTimeout(1000);
    await page.keyboard.press("Escape");
    await page.keyboard.type("o");
    await ghost.first().waitFor({ state: "visible", timeout: 30000 });
    // A streamed suggestion shows its first part, then the whole once decoded (on a slow machine
    // the first part can stay a good half second): read it once it has not changed for 1.5 s.
    let shown = "";
    for (let k = 0, last = null, same = 0; k < 100 && same < 10; k++) {
      const now = (await ghost.allTextContents()).join("");
      same = now && now === last ? same + 1 : 0;
      shown = now;
      last = now;
      await page.waitForTimeout(150);
    }
    await page.screenshot({ path: path.join(outDir, "before-tab.png") });
    await page.keyboard.press("Tab");
    await page.waitForTimeout(500);
    await page.keyboard.press("Control+S");
    await page.waitForTimeout(1500);
    await page.screenshot({ path: path.join(outDir, "after-tab.png") });
    const ok = latencies.filter((x) => x !== null).sort((a, b) => a - b);
    const pick = (q) => (ok.length ? ok[Math.min(ok.length - 1, Math.floor(q * ok.length))] : null);
    Object.assign(result, { ok: true, shown, firstGhost, trials, withGhost: ok.length, p50_ms: pick(0.5), p90_ms: pick(0.9), latencies, keyAt });
  } catch (e) {
    result.error = String(e && e.stack || e);
    await page.screenshot({ path: path.join(outDir, "failure.png") }).catch(() => {});
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(result));
}

main();
