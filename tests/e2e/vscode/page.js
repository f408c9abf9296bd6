// What the editor drivers (replay.js, typist.js) share: starting VS Code in chromium, reading the
// ghost text on screen, and the moves a person makes (open a file, go to a line and column).
const { chromium } = require("playwright-core");

// In the page: the ghost text on screen now ("" when none). VS Code draws a suggestion's text on
// the cursor line as "after" decorations, and its further lines in a view zone (.ghost-text
// spans, a parent per line).
function shownText() {
  const visible = (sel) => [...document.querySelectorAll(sel)].filter((e) => e.offsetParent !== null);
  const inline = visible(".ghost-text-decoration, .ghost-text-decoration-preview").map((e) => e.textContent).join("");
  const lines = [...new Set(visible(".ghost-text").map((e) => e.parentElement))].map((e) => e.textContent);
  return lines.length ? [inline, ...lines].join("\n") : inline;
}

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

// Open a file of the trace: by name, then (not the first time) its text as the trace has it now,
// pasted as one edit (typed in with insertText, VS Code applies a large file character by
// character and freezes for seconds, and the keys that follow would land late, in a burst).
async function openFile(page, file, text, first) {
  await quickOpen(page, file);
  await page.locator(".monaco-editor .view-lines").first().click();
  if (!first) {
    await page.evaluate((t) => navigator.clipboard.writeText(t), text);
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Control+V");
  }
}

// A key as the person typed it, and the editor's auto-indent after it (`then`), as one step.
async function typeKey(page, text, then) {
  if (text === "\t") await page.keyboard.insertText(text);
  else if (text === "\n") await page.keyboard.press("Enter");
  else await page.keyboard.type(text);
  if (then) await page.keyboard.insertText(then);
}

async function deleteAt(page, line, col, length) {
  await goTo(page, line, col);
  for (let k = 0; k < length; k++) await page.keyboard.press("Shift+ArrowRight");
  await page.keyboard.press("Delete");
}

async function save(page) {
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+S");
  await page.waitForTimeout(500);
}

// chromium on the workspace, once the extension under test is active: options.status is its
// status bar text, openFirst a file whose language activates it, closeTab a page it opens on its
// first start (waited for and closed).
async function start(url, options) {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-dev-shm-usage"],
  });
  // (the clipboard: a file's new text is pasted in, one edit, as a person's editor loads it)
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, permissions: ["clipboard-read", "clipboard-write"] });
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
  return { browser, page };
}

module.exports = { shownText, quickOpen, goTo, openFile, typeKey, deleteAt, save, start };
