// HTTP client of the fimgate gateway: a streamed /v1/completions request. A cancelled request
// aborts its HTTP request, and the gateway's cancel-previous stops the generation for that document.
import { Settings, SseParser, requestBody } from "./logic";

export class GatewayError extends Error {}

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
  signal: AbortSignal,
  onPiece: (piece: string) => void,
): Promise<boolean> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (s.apiKey) {
    headers["authorization"] = `Bearer ${s.apiKey}`;
  }
  let res: Response;
  try {
    res = await fetch(`${s.gatewayUrl.replace(/\/$/, "")}/v1/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify(requestBody(uri, text, offset, s)),
      signal,
    });
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
