// Pure logic of the extension (no vscode import), unit-tested with mocha.

/** What the extension remembers of the suggestion it last showed. */
export interface Shown {
  uri: string;
  prefix: string; // document text before the cursor when the suggestion was made
  completion: string;
}

/**
 * Keeps a shown suggestion alive while the person types through it: if they typed exactly
 * the suggestion's first characters, the rest is still right, and no request is needed.
 */
export class SuggestionCache {
  private shown: Shown | undefined;

  remember(uri: string, prefix: string, completion: string): void {
    this.shown = completion ? { uri, prefix, completion } : undefined;
  }

  /** The rest of the remembered suggestion, or undefined when typing left it. */
  lookup(uri: string, prefix: string): string | undefined {
    const s = this.shown;
    if (!s || s.uri !== uri || !prefix.startsWith(s.prefix)) {
      return undefined;
    }
    const typed = prefix.slice(s.prefix.length);
    if (!s.completion.startsWith(typed) || typed.length >= s.completion.length) {
      return undefined;
    }
    return s.completion.slice(typed.length);
  }

  clear(): void {
    this.shown = undefined;
  }
}

export interface Settings {
  gatewayUrl: string;
  apiKey: string;
  debounceMs: number;
  maxTokens: number;
}

/** The /v1/completions body for a cursor in a document. */
export function requestBody(uri: string, text: string, offset: number, s: Settings): Record<string, unknown> {
  return {
    prompt: text.slice(0, offset),
    suffix: text.slice(offset),
    max_tokens: s.maxTokens,
    document: uri,
    stream: false,
  };
}

/** Resolve after ms unless cancelled first; says whether to go on. */
export function debounce(ms: number, isCancelled: () => boolean): Promise<boolean> {
  return new Promise((resolve) => setTimeout(() => resolve(!isCancelled()), ms));
}

export type Status = { kind: "active" } | { kind: "busy" } | { kind: "error"; message: string } | { kind: "off" };

export function statusText(s: Status): { text: string; tooltip: string } {
  switch (s.kind) {
    case "active":
      return { text: "$(sparkle) fimgate", tooltip: "fimgate: ready" };
    case "busy":
      return { text: "$(sync~spin) fimgate", tooltip: "fimgate: completing" };
    case "off":
      return { text: "$(circle-slash) fimgate", tooltip: "fimgate: off (run 'fimgate: Toggle')" };
    case "error":
      return { text: "$(error) fimgate", tooltip: `fimgate: ${s.message}` };
  }
}
