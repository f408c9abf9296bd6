// fimgate for VS Code: inline completions from a fimgate gateway, with cancellation, a status bar
// item, a cache of recent suggestions that answers typing through one, and coming back to where
// one was made, without a request, and suggestions that show their first part while the rest is
// still being decoded (it appears when complete, through the cache). A typed edit is asked for
// when it reaches the extension; VS Code's own request, 50 ms later, waits for that one.
// Context: a ring of chunks from the files the person worked in (where the cursor was in the file
// they left), sent before the current file; files matching secret patterns are never read for it,
// and get no completions.
import * as vscode from "vscode";
import { fetchSummary, sendEvent, streamCompletion, warmUp } from "./client";
import {
  ContextRing,
  caretAfter,
  Growing,
  MoveWarmer,
  Settings,
  Status,
  SuggestionCache,
  chunkLines,
  debounce,
  describeUsage,
  isSecret,
  lineRest,
  offered,
  outcome,
  prefetchPlace,
  statusText,
  summaryLines,
  typedPast,
} from "./logic";

let status: vscode.StatusBarItem;
const MIN_TOKEN_PROB = 0.6; // the default of fimgate.minTokenProb (package.json says the same)
const MOVE_REST_MS = 150; // a cursor still this long after a move without an edit: pre-warm there

function settings(): Settings & { enabled: boolean; contextExclude: string[]; prefetch: boolean } {
  const c = vscode.workspace.getConfiguration("fimgate");
  return {
    gatewayUrl: c.get("gatewayUrl", "http://127.0.0.1:8418"),
    apiKey: c.get("apiKey", ""),
    debounceMs: c.get("debounceMs", 0),
    maxTokens: c.get("maxTokens", 48),
    cacheEntries: c.get("cacheEntries", 32),
    maxPredictMs: c.get("maxPredictMs", 200),
    minTokenProb: c.get("minTokenProb", MIN_TOKEN_PROB),
    showPartialAfterMs: c.get("showPartialAfterMs", 0),
    contextChars: c.get("contextChars", 3000),
    contextExclude: c.get("contextExclude", [] as string[]),
    alternatives: c.get("alternatives", 8),
    enabled: c.get("enabled", true),
    prefetch: c.get("prefetch", true),
  };
}

function show(s: Status): void {
  const { text, tooltip } = statusText(s);
  status.text = text;
  status.tooltip = tooltip;
}

export function activate(context: vscode.ExtensionContext): void {
  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  status.command = "fimgate.toggle";
  status.name = "fimgate";
  show(settings().enabled ? { kind: "active" } : { kind: "off" });
  status.show();
  let cache = new SuggestionCache(settings().cacheEntries);
  let ring = new ContextRing(settings().contextChars);
  const name = (doc: vscode.TextDocument): string => vscode.workspace.asRelativePath(doc.uri, false);
  const WRITTEN = new Set(["output", "debug", "git", "vscode-settings", "vscode-userdata"]); // not files a person writes
  const secret = (doc: vscode.TextDocument): boolean => isSecret(doc.uri.path, settings().contextExclude);
  const private_ = (doc: vscode.TextDocument): boolean => secret(doc) || WRITTEN.has(doc.uri.scheme);

  // Leaving a file: the lines around its cursor join the context. Arriving: pre-warm there.
  let current = vscode.window.activeTextEditor;
  const switched = (next: vscode.TextEditor | undefined): void => {
    const left = current;
    if (!next || next.document === left?.document) {
      return; // focus left the editors, or came back to the same file
    }
    current = next;
    // (a preview tab replaced by the next file has closed its document by now: its text is still readable)
    if (left && !private_(left.document)) {
      const [first, last] = chunkLines(left.selection.active.line, left.document.lineCount);
      const range = new vscode.Range(first, 0, last, left.document.lineAt(last).text.length);
      ring.add(name(left.document), first, last, left.document.getText(range));
    }
    const s = settings();
    if (s.enabled && !private_(next.document)) {
      const doc = next.document;
      warmUp(doc.uri.toString(), doc.getText(), doc.offsetAt(next.selection.active), s, ring.forDocument(name(doc)));
    }
  };
  // The cursor moved without an edit (a click, the arrows, Go to Line): once it rests there, pre-warm
  // that place, so the first key typed there finds its prompt computed - after a move a person
  // usually reads before typing. A move that lands where a suggestion was asked already does not.
  const moves = new MoveWarmer();
  let resting: ReturnType<typeof setTimeout> | undefined;
  const moved = (e: vscode.TextEditorSelectionChangeEvent): void => {
    const doc = e.textEditor.document;
    clearTimeout(resting);
    if (!moves.moved(doc.uri.toString(), doc.version, e.selections.length === 1 && e.selections[0].isEmpty)) {
      return;
    }
    resting = setTimeout(() => {
      const s = settings();
      const editor = vscode.window.activeTextEditor;
      if (!s.enabled || !editor || editor.document !== doc || private_(doc) || !editor.selection.isEmpty) {
        return;
      }
      const uri = doc.uri.toString();
      const offset = doc.offsetAt(editor.selection.active);
      const text = doc.getText();
      const inFlight = asked.get(uri);
      const comingHere = inFlight !== undefined && !inFlight.grow.over && inFlight.prefix === text.slice(0, offset);
      if (!comingHere && moves.warm(uri, doc.version, offset)) {
        // (a suggestion on its way for this place is not superseded; one for the place left is)
        warmUp(uri, text, offset, s, ring.forDocument(name(doc)));
      }
    }, MOVE_REST_MS);
  };

  // Acceptance events (the gateway's /v1/events): shown when handed to VS Code, accepted when VS
  // Code runs the item's command (Tab), dismissed when the next request there does not continue it.
  const lastShown = new Map<string, { id: string; prefix: string; lineRest: string; completion: string }>();
  const viewed = new Set<string>();
  const offer = (uri: string, position: vscode.Position, prefix: string, rest: string, text: string, id: string, alternatives: string[] = []) => {
    const item = new vscode.InlineCompletionItem(text, new vscode.Range(position, position));
    item.command = { command: "fimgate.accepted", title: "fimgate: accepted", arguments: [uri, id, text.length] };
    // (an alternative taken is not reported: the gateway's events count its suggestion)
    const others = offered(text, alternatives).slice(1).map((a) => new vscode.InlineCompletionItem(a, new vscode.Range(position, position)));
    lastShown.set(uri, { id, prefix, lineRest: rest, completion: text });
    if (id && !viewed.has(id)) {
      if (viewed.size > 1000) {
        viewed.clear();
      }
      viewed.add(id);
      sendEvent(settings(), "view", id);
    }
    return [item, ...others];
  };
  const settle = (uri: string, prefix: string, rest: string) => {
    const before = lastShown.get(uri);
    const now = before && outcome(before, prefix, rest);
    if (before && now !== "open") {
      lastShown.delete(uri);
      if (now === "dismissed") {
        sendEvent(settings(), "dismiss", before.id);
      }
    }
  };

  // per document: the latest suggestion asked for (streaming, or ended), and where
  type Asked = {
    abort: AbortController;
    prefix: string;
    rest: string;
    grow: Growing;
    meta: { id: string; usage?: unknown; alternatives?: string[] };
  };
  const asked = new Map<string, Asked>();

  // When a suggestion finished growing: ask VS Code again if the cursor is still where it leads,
  // and the cache answers with the whole (VS Code only asks after an edit or a trigger).
  const showGrown = (uri: string): void => {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.toString() !== uri || !editor.selection.isEmpty) {
      return;
    }
    const text = editor.document.getText();
    const offset = editor.document.offsetAt(editor.selection.active);
    if (cache.lookup(uri, text.slice(0, offset), lineRest(text, offset)) !== undefined) {
      void vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
    }
  };

  // Ask the gateway for a suggestion at this place (superseding the document's one in flight):
  // its first part is remembered when it arrives, the whole when complete.
  const ask = (document: vscode.TextDocument, text: string, offset: number, s: ReturnType<typeof settings>, prefetched = false): Asked => {
    const uri = document.uri.toString();
    const prefix = text.slice(0, offset);
    const rest = lineRest(text, offset);
    asked.get(uri)?.abort.abort(); // superseded (the gateway cancels it too)
    const me: Asked = { abort: new AbortController(), prefix, rest, grow: new Growing(s.showPartialAfterMs), meta: { id: "" } };
    asked.set(uri, me);
    if (!prefetched) {
      moves.ask(uri, document.version, offset); // (a prefetch's place is not in this version)
    }
    const context = ring.forDocument(name(document));
    streamCompletion(uri, text, offset, s, context, me.abort.signal, (piece) => me.grow.add(piece), me.meta).then(
      (complete) => me.grow.end(complete),
      (e) => me.grow.fail(e as Error),
    );
    show({ kind: "busy" });
    let first = "";
    me.grow.first.then(
      (text) => {
        first = text;
        show({ kind: "active" });
        if (!me.abort.signal.aborted) {
          cache.remember(uri, prefix, rest, first, me.meta.id, me.meta.alternatives);
        }
      },
      (e) => show({ kind: "error", message: (e as Error).message }),
    );
    void me.grow.ended.then((complete) => {
      const last = describeUsage(me.meta.usage);
      if (last) {
        show({ kind: "active", last });
      }
      if (complete && me.grow.text.length > first.length) {
        cache.remember(uri, prefix, rest, me.grow.text, me.meta.id, me.meta.alternatives);
        showGrown(uri);
      } else if (!complete && first) {
        cache.forget(uri, prefix, rest, first); // only a part: the next visit asks for the whole
      }
      if (complete) {
        // (not whether it was aborted since: VS Code cancels a request it has moved on from, and
        // the extension aborts a finished one with it; where the person is decides)
        prefetch(uri, prefix, rest, me.grow.text);
      }
    });
    return me;
  };

  // Prefetch (llama.vscode's cacheFutureSuggestion): a whole suggestion on screen, ask in the
  // background for the place it leads to, so that a Tab finds the next one in the cache (or on
  // its way). A key that leaves the suggestion supersedes it; the gateway stops it.
  const prefetch = (uri: string, prefix: string, rest: string, suggestion: string): void => {
    const s = settings();
    const editor = vscode.window.activeTextEditor;
    if (!s.prefetch || !s.enabled || !editor || editor.document.uri.toString() !== uri || !editor.selection.isEmpty) {
      return;
    }
    const doc = editor.document;
    const place = prefetchPlace(prefix, rest, suggestion, doc.getText(), doc.offsetAt(editor.selection.active));
    const after = place && place.text.slice(0, place.offset);
    if (place && after !== undefined && !cache.find(uri, after, rest) && !askedHere(uri, after, rest)) {
      ask(doc, place.text, place.offset, s, true);
    }
  };

  // The suggestion asked for here, while it can still answer (not superseded, not failed).
  const askedHere = (uri: string, prefix: string, rest: string): Asked | undefined => {
    const me = asked.get(uri);
    return me && me.prefix === prefix && me.rest === rest && !me.abort.signal.aborted && !me.grow.error ? me : undefined;
  };

  // Typed past what has arrived of the suggestion still streaming here: wait for it (typedPast).
  const following = (uri: string, prefix: string, rest: string): { ahead: Asked; typed: string } | undefined => {
    const ahead = asked.get(uri);
    const typed = ahead && !ahead.grow.over ? typedPast(ahead.prefix, ahead.rest, ahead.grow.text, prefix, rest) : undefined;
    return ahead && typed !== undefined ? { ahead, typed } : undefined;
  };

  // An edit that typing makes: ask at once for where the caret now is, instead of when VS Code
  // asks (its inline-suggestion delay, 50 ms, and the trip to this process come first); VS Code's
  // request for the same place then finds this one on its way.
  const versions = new Map<string, number>(); // per document: its version at the last change event
  const edited = (e: vscode.TextDocumentChangeEvent): void => {
    const editor = vscode.window.activeTextEditor;
    const doc = e.document;
    const uri = doc.uri.toString();
    const last = versions.get(uri);
    versions.set(uri, doc.version);
    const caret = caretAfter(e.contentChanges, last === undefined ? 0 : doc.version - last);
    if (caret === undefined || e.reason !== undefined || editor?.document !== doc || editor.selections.length !== 1) {
      return; // (undo and redo put the caret elsewhere; output channels and other documents change too)
    }
    const s = settings();
    if (!s.enabled || s.debounceMs > 0 || private_(doc)) {
      return; // (a debounce setting asks to wait)
    }
    if (!vscode.workspace.getConfiguration("editor", doc.uri).get("inlineSuggest.enabled", true)) {
      return; // VS Code would not ask
    }
    const text = doc.getText();
    const prefix = text.slice(0, caret);
    const rest = lineRest(text, caret);
    if (cache.find(uri, prefix, rest) || following(uri, prefix, rest) || askedHere(uri, prefix, rest)) {
      return;
    }
    ask(doc, text, caret, s);
  };

  const provider: vscode.InlineCompletionItemProvider = {
    async provideInlineCompletionItems(document, position, _context, token) {
      const s = settings();
      if (!s.enabled || secret(document)) {
        return [];
      }
      const text = document.getText();
      const offset = document.offsetAt(position);
      const uri = document.uri.toString();
      const rest = lineRest(text, offset);
      const prefix = text.slice(0, offset);
      settle(uri, prefix, rest);
      moves.ask(uri, document.version, offset);
      const cached = cache.find(uri, prefix, rest);
      if (cached) {
        prefetch(uri, prefix, rest, cached.rest); // (after a Tab onto a prefetched one: the next)
        return offer(uri, position, prefix, rest, cached.rest, cached.id, cached.alternatives);
      }
      let me = askedHere(uri, prefix, rest); // (asked at the edit)
      if (!me) {
        const along = following(uri, prefix, rest);
        if (along) {
          const { ahead, typed } = along;
          const complete = await Promise.race([ahead.grow.ended, new Promise<boolean>((r) => token.onCancellationRequested(() => r(false)))]);
          const whole = ahead.grow.text;
          if (token.isCancellationRequested) {
            return [];
          }
          if (complete && whole.length > typed.length && whole.startsWith(typed)) {
            return offer(uri, position, prefix, rest, whole.slice(typed.length), ahead.meta.id);
          }
        }
        if (!(await debounce(s.debounceMs, () => token.isCancellationRequested))) {
          return [];
        }
        me = ask(document, text, offset, s);
      }
      const abort = me.abort;
      const sub = token.onCancellationRequested(() => abort.abort());
      let first: string;
      try {
        first = await me.grow.first; // shaped and cleaned by the gateway
      } catch {
        return []; // (the status bar says why)
      } finally {
        sub.dispose(); // once shown, the rest keeps coming even when VS Code moves on
      }
      if (token.isCancellationRequested) {
        abort.abort();
        return [];
      }
      return first ? offer(uri, position, prefix, rest, first, me.meta.id, me.meta.alternatives) : [];
    },
  };

  context.subscriptions.push(
    status,
    vscode.languages.registerInlineCompletionItemProvider({ pattern: "**" }, provider),
    vscode.window.onDidChangeActiveTextEditor(switched),
    vscode.window.onDidChangeTextEditorSelection(moved),
    vscode.workspace.onDidChangeTextDocument(edited),
    vscode.workspace.onDidCloseTextDocument((doc) => versions.delete(doc.uri.toString())),
    vscode.commands.registerCommand("fimgate.showStats", async () => {
      try {
        const lines = summaryLines(await fetchSummary(settings()));
        void vscode.window.showInformationMessage(`fimgate: ${lines.join("; ")}`, { modal: false });
      } catch (e) {
        void vscode.window.showWarningMessage(`fimgate: ${(e as Error).message}`);
      }
    }),
    vscode.commands.registerCommand("fimgate.accepted", (uri: string, id: string, chars: number) => {
      lastShown.delete(uri);
      sendEvent(settings(), "select", id, chars);
    }),
    vscode.commands.registerCommand("fimgate.toggle", async () => {
      const c = vscode.workspace.getConfiguration("fimgate");
      const on = !c.get("enabled", true);
      await c.update("enabled", on, vscode.ConfigurationTarget.Global);
      cache = new SuggestionCache(settings().cacheEntries);
      ring = new ContextRing(settings().contextChars);
      show(on ? { kind: "active" } : { kind: "off" });
    }),
  );
}

export function deactivate(): void {}
