// HTTP client of the fimgate gateway: a streamed /v1/completions request. A cancelled request
// aborts its HTTP request, and the gateway's cancel-previous stops the generation for that document.
import { Chunk, Settings, SseParser, requestBody } from "./logic";

export class GatewayError extends Error {}

function post(s: Settings, body: Record<string, unknown>, signal?: AbortSignal, path = "/v1/completions"): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (s.apiKey) {
    headers["authorization"] = `Bearer ${s.apiKey}`;
  }
  return fetch(`${s.gatewayUrl.replace(/\/$/, "")}${path}`, { method: "POST", headers, body: JSON.stringify(body), signal });
}

/**
 * Pre-warm: the gateway prefills the prompt for this cursor (no tokens decoded; in chunks that
 * yield to anyone typing), so the first key there is a prefix hit. Best effort: errors are ignored.
 */
export function warmUp(uri: string, text: string, offset: number, s: Settings, context: Chunk[]): void {
  post(s, { ...requestBody(uri, text, offset, s, context), max_tokens: 0, stream: false }).then(
    (r) => r.body?.cancel(),
    () => undefined,
  );
}

/**
 * Ask for a suggestion and hand each streamed piece to `onPiece`; resolves with whether the
 * suggestion is complete (false when it was aborted or the gateway cancelled it: a newer request
 * for the same document superseded it).
 */
export async function streamCompletion(
  uri: string,
  text: string,
  offset: number,
  s: Settings,
  context: Chunk[],
  signal: AbortSignal,
  onPiece: (piece: string) => void,
  meta: { id: string; usage?: unknown; alternatives?: string[] } = { id: "" },
): Promise<boolean> {
  let res: Response;
  try {
    res = await post(s, requestBody(uri, text, offset, s, context), signal);
  } catch (e) {
    if ((e as Error).name === "AbortError") {
      return false;
    }
    throw new GatewayError(`cannot reach ${s.gatewayUrl}: start it with 'fimgate serve'`);
  }
  if (!res.ok || !res.body) {
    const body = (await res.json().catch(() => ({}))) as any;
    throw new GatewayError(body?.error?.message ?? `gateway answered ${res.status}`);
  }
  const parser = new SseParser();
  const decoder = new TextDecoder();
  let complete = false;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      for (const data of parser.feed(decoder.decode(chunk, { stream: true }))) {
        if (data === "[DONE]") {
          return complete;
        }
        const event = JSON.parse(data);
        if (event.error) {
          throw new GatewayError(event.error.message ?? "the gateway failed mid-suggestion");
        }
        meta.id = event.id ?? meta.id;
        meta.usage = event.fimgate ?? meta.usage;
        if (Array.isArray(event.fimgate_alternatives)) {
          meta.alternatives = event.fimgate_alternatives.filter((a: unknown): a is string => typeof a === "string");
        }
        const choice = event.choices?.[0];
        if (choice?.text) {
          onPiece(choice.text);
        }
        if (choice?.finish_reason) {
          complete = event.fimgate?.finish_reason !== "cancelled";
        }
      }
    }
  } catch (e) {
    if ((e as Error).name === "AbortError") {
      return false;
    }
    throw e;
  }
  return complete;
}

/** An acceptance event (the gateway's POST /v1/events, Tabby's shape): best effort, errors ignored. */
export function sendEvent(s: Settings, type: "view" | "select" | "dismiss", completionId: string, acceptedChars?: number): void {
  if (!completionId) {
    return;
  }
  const body = { type, completion_id: completionId, ...(acceptedChars === undefined ? {} : { accepted_chars: acceptedChars }) };
  post(s, body, undefined, "/v1/events").then(
    (r) => r.body?.cancel(),
    () => undefined,
  );
}

/** This user's numbers from the gateway (GET /v1/events/summary). */
export async function fetchSummary(s: Settings): Promise<any> {
  const headers: Record<string, string> = s.apiKey ? { authorization: `Bearer ${s.apiKey}` } : {};
  const res = await fetch(`${s.gatewayUrl.replace(/\/$/, "")}/v1/events/summary`, { headers });
  if (!res.ok) {
    throw new GatewayError(`gateway answered ${res.status}`);
  }
  return res.json();
}
