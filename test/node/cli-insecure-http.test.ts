/**
 * The CLI puts ACKBOX_ADMIN_TOKEN in every request's header: it refuses a
 * plain http:// --url to another machine unless the operator says
 * --insecure-http, and keeps loopback (the local run) working without it.
 */
import { describe, expect, it } from "vitest";
import { AdminClient } from "../../cli/client.ts";
import { freePort } from "../../cli/local/processes.ts";
import { runCli } from "./support/cli-in-process.ts";

const ackbox = (argv: string[]) =>
  runCli({ argv, env: { ACKBOX_ADMIN_TOKEN: "a-token-that-must-not-cross-in-clear" }, isTty: false, sleep: async () => {} });

describe("a plain http:// --url", () => {
  it("to another machine is refused before anything is sent: exit 2, saying why and how to say so", async () => {
    const sent: string[] = [];
    const fetch = (async (url: URL) => {
      sent.push(String(url));
      return Response.json({});
    }) as unknown as typeof globalThis.fetch;
    for (const url of [
      "http://ackbox-ingress.example.workers.dev",
      "http://10.0.0.5:8787",
      "http://128.0.0.1",
      "http://localhost.example",
    ]) {
      expect(() => new AdminClient({ url, token: "t", timeoutMs: 1000, fetch }), url).toThrow(/plain http:\/\/ to another machine/);
    }
    expect(sent).toEqual([]);
    const result = await ackbox(["backlog", "--url", "http://ackbox-ingress.example.workers.dev"]);
    expect([result.code, result.err]).toEqual([
      2,
      "ackbox: --url http://ackbox-ingress.example.workers.dev is plain http:// to another machine: ACKBOX_ADMIN_TOKEN would cross the network in the clear. Use https://, or pass --insecure-http if that network is yours\n",
    ]);
  });

  it("to another machine is used with --insecure-http, the token sent as asked", async () => {
    const sent: { url: string; authorization: string | null }[] = [];
    const fetch = (async (url: URL, init: RequestInit) => {
      sent.push({ url: String(url), authorization: new Headers(init.headers).get("authorization") });
      return Response.json({ ok: true });
    }) as unknown as typeof globalThis.fetch;
    const client = new AdminClient({ url: "http://10.0.0.5:8787", token: "t", timeoutMs: 1000, insecureHttp: true, fetch });
    await client.get("/admin/backlog");
    expect(sent).toEqual([{ url: "http://10.0.0.5:8787/admin/backlog", authorization: "Bearer t" }]);
    // The flag parses on every command: the refusal is gone, and what is left is the network (a host that does not resolve).
    const result = await ackbox(["backlog", "--url", "http://ackbox.invalid", "--insecure-http", "--timeout", "1"]);
    expect([result.code, result.err]).toEqual([3, expect.stringContaining("cannot reach http://ackbox.invalid")]);
  });

  it("to loopback (127.0.0.0/8, localhost, [::1]) needs no flag: it gets as far as the network", async () => {
    const port = await freePort();
    for (const host of ["127.0.0.1", "127.0.0.2", "127.255.255.254", "localhost", "[::1]"]) {
      const result = await ackbox(["backlog", "--url", `http://${host}:${port}`, "--timeout", "1"]);
      expect([result.code, result.err], host).toEqual([3, expect.stringContaining(`cannot reach http://${host}:${port}`)]);
    }
  });

  it("https:// to any host needs no flag", () => {
    expect(() => new AdminClient({ url: "https://ackbox-ingress.example.workers.dev", token: "t", timeoutMs: 1000 })).not.toThrow();
  });

  it("--help says so", async () => {
    const { out } = await ackbox(["--help"]);
    expect(out).toContain("--insecure-http");
    expect(out).toContain("127.0.0.0/8, localhost");
  });
});
