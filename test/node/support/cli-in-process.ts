/**
 * The CLI run in this process against a local HTTP server: what the CLI's
 * node tests share, so each test says only what it serves and what it runs.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Io, main } from "../../../cli/main.ts";

/** Runs `npx ackbox` in process and returns its exit code and everything it printed. */
export async function runCli(io: Omit<Io, "out" | "err">): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await main({
    ...io,
    out: (text) => {
      out += text;
    },
    err: (text) => {
      err += text;
    },
  });
  return { code, out, err };
}

/** A loopback server answering each path with `route(path)`: a status and a JSON body. */
export async function serveJson(route: (path: string) => readonly [number, string]): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((request, response) => {
    const [status, body] = route(request.url ?? "");
    response.writeHead(status, { "content-type": "application/json" }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
