// HTTP client of the fimgate gateway. A cancelled VS Code request aborts its HTTP request,
// and the gateway's cancel-previous stops the generation for that document.
import { Settings, requestBody } from "./logic";

export class GatewayError extends Error {}

export async function complete(uri: string, text: string, offset: number, s: Settings, signal: AbortSignal): Promise<string> {
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
      return "";
    }
    throw new GatewayError(`cannot reach ${s.gatewayUrl}: start it with 'fimgate serve'`);
  }
  const body = (await res.json().catch(() => ({}))) as any;
  if (!res.ok) {
    throw new GatewayError(body?.error?.message ?? `gateway answered ${res.status}`);
  }
  return body?.choices?.[0]?.text ?? "";
}
