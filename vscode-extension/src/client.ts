// HTTP client of the fimgate gateway: a streamed /v1/completions request. A cancelled request
// aborts its HTTP request, and the gateway's cancel-previous stops the generation for that document.
import { Chunk, Settings, SseParser, requestBody } from "./logic";

export class GatewayError extends Error {}

function post(s: Settings, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (s.apiKey) {
    headers["authorization"] = `Bearer ${s.apiKey}`;
  }
  return fetch(`${s.gatewayUrl.replace(/\/$/, "")}/v1/completions`, { method: "POST", headers, body: JSON.stringify(body), signal });
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
