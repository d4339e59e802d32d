export type BodyRead = { readonly ok: true; readonly bytes: Uint8Array } | { readonly ok: false; readonly reason: string };

/**
 * Reads a request body once, refusing it as soon as it passes `limit` bytes:
 * a declared Content-Length over the limit is refused before a byte is read,
 * and a chunked or lying body is cut off while streaming. The raw bytes are
 * what the signature covers, so nothing may decode or re-encode them first.
 */
export async function readBodyWithLimit(request: Request, limit: number): Promise<BodyRead> {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) {
    return { ok: false, reason: `body of ${declared} bytes is over the ${limit}-byte limit` };
  }
  if (request.body === null) return { ok: true, bytes: new Uint8Array(0) };
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return { ok: false, reason: `body is over the ${limit}-byte limit` };
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { ok: true, bytes };
}
