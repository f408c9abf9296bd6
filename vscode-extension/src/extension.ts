// fimgate for VS Code: inline completions from a fimgate gateway, with debounce, cancellation,
// a status bar item, and a cache of recent suggestions that answers typing through one, and
// coming back to where one was made, without a request.
import * as vscode from "vscode";
import { complete } from "./client";
import { Settings, Status, SuggestionCache, debounce, lineRest, statusText } from "./logic";

let status: vscode.StatusBarItem;

function settings(): Settings & { enabled: boolean } {
  const c = vscode.workspace.getConfiguration("fimgate");
  return {
    gatewayUrl: c.get("gatewayUrl", "http://127.0.0.1:8418"),
    apiKey: c.get("apiKey", ""),
    debounceMs: c.get("debounceMs", 0),
    maxTokens: c.get("maxTokens", 48),
    cacheEntries: c.get("cacheEntries", 32),
    maxPredictMs: c.get("maxPredictMs", 200),
    enabled: c.get("enabled", true),
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

  const provider: vscode.InlineCompletionItemProvider = {
    async provideInlineCompletionItems(document, position, _context, token) {
      const s = settings();
      if (!s.enabled) {
        return [];
      }
      const text = document.getText();
      const offset = document.offsetAt(position);
      const uri = document.uri.toString();
      const rest = lineRest(text, offset);
      const cached = cache.lookup(uri, text.slice(0, offset), rest);
      if (cached) {
        return [new vscode.InlineCompletionItem(cached, new vscode.Range(position, position))];
      }
      if (!(await debounce(s.debounceMs, () => token.isCancellationRequested))) {
        return [];
      }
      const abort = new AbortController();
      const sub = token.onCancellationRequested(() => abort.abort());
      show({ kind: "busy" });
      try {
        const item = await complete(uri, text, offset, s, abort.signal); // shaped and cleaned by the gateway
        show({ kind: "active" });
        if (token.isCancellationRequested) {
          return [];
        }
        cache.remember(uri, text.slice(0, offset), rest, item);
        return item ? [new vscode.InlineCompletionItem(item, new vscode.Range(position, position))] : [];
      } catch (e) {
        show({ kind: "error", message: (e as Error).message });
        return [];
      } finally {
        sub.dispose();
      }
    },
  };

  context.subscriptions.push(
    status,
    vscode.languages.registerInlineCompletionItemProvider({ pattern: "**" }, provider),
    vscode.commands.registerCommand("fimgate.toggle", async () => {
      const c = vscode.workspace.getConfiguration("fimgate");
      const on = !c.get("enabled", true);
      await c.update("enabled", on, vscode.ConfigurationTarget.Global);
      cache = new SuggestionCache(settings().cacheEntries);
      show(on ? { kind: "active" } : { kind: "off" });
    }),
  );
}

export function deactivate(): void {}
