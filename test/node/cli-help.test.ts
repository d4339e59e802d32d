/**
 * `npx ackbox … --help`, in process: every example a help text shows is one
 * the parser accepts (it gets as far as the network, never a usage error),
 * and the help says what the code does (the id formats events show takes).
 * Nothing runs: --url points at a port nobody listens on.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../cli/local/processes.ts";
import { runCli } from "./support/cli-in-process.ts";

const HELPS: Record<string, string[]> = {
  global: ["--help"],
  backlog: ["backlog", "--help"],
  "dead list": ["dead", "list", "--help"],
  "dead replay": ["dead", "replay", "--help"],
  "events show": ["events", "show", "--help"],
  "installations list": ["installations", "list", "--help"],
  "timers list": ["timers", "list", "--help"],
};

function ackbox(argv: string[], env: Record<string, string> = {}) {
  return runCli({ argv, env, isTty: false, sleep: async () => {}, localAdminToken: () => "token-for-the-parser-test" });
}

/** The lines under "Examples:", up to the next blank line. */
function examplesOf(help: string): string[] {
  const start = help.indexOf("\nExamples:\n");
  if (start < 0) return [];
  const lines: string[] = [];
  for (const line of help.slice(start + "\nExamples:\n".length).split("\n")) {
    if (line.trim() === "") break;
    lines.push(line.trim());
  }
  return lines;
}

describe("npx ackbox --help", () => {
  let closed: string;
  const texts: Record<string, string> = {};

  beforeAll(async () => {
    closed = `http://127.0.0.1:${await freePort()}`;
    for (const [name, argv] of Object.entries(HELPS)) {
      const { code, out } = await ackbox(argv);
      expect(code, name).toBe(0);
      texts[name] = out;
    }
  });

  it.each(Object.keys(HELPS))("%s shows examples, and the parser accepts every one", async (name) => {
    const examples = examplesOf(texts[name] ?? "");
    expect(examples.length, name).toBeGreaterThan(0);
    for (const example of examples) {
      expect(example, name).toMatch(/^npx ackbox /);
      // The example's own --url is swapped for a closed port: the parse is what is tested, not a server.
      const argv = example
        .replace(/^npx ackbox /, "")
        .replace(/--url \S+/, "")
        .split(/\s+/)
        .filter(Boolean);
      const result = await ackbox([...argv, "--url", closed, "--timeout", "1"]);
      expect([0, 3], `${example}: exit ${result.code} ${result.err}`).toContain(result.code);
      if (result.code === 3) expect(result.err, example).toContain(`cannot reach ${closed}`);
    }
  });

  it("events show names the id formats the ingress keys receipts by, not abbreviations", () => {
    const help = texts["events show"] ?? "";
    for (const format of [
      "command:<team>:<trigger_id>",
      "interaction:<team>:<trigger_id>",
      "interaction:<team>:view_closed:",
      "alert:<kind>",
    ])
      expect(help).toContain(format);
    expect(help).not.toMatch(/\bcmd:|\bint:/);
  });

  it("says how the local run's token is found, and that ACKBOX_ADMIN_TOKEN wins", () => {
    expect(texts.global).toContain("reads the run's generated token from its run folder");
    expect(texts.global).toContain("ACKBOX_ADMIN_TOKEN, when set, always wins");
  });

  it("defaults --url to the local run on PORT", async () => {
    const port = new URL(closed).port;
    const result = await ackbox(["backlog", "--timeout", "1"], { PORT: port });
    expect(result.code).toBe(3);
    expect(result.err).toContain(`cannot reach http://127.0.0.1:${port}`);
    const bad = await ackbox(["backlog"], { PORT: "eighty" });
    expect([bad.code, bad.err]).toEqual([2, 'ackbox: PORT must be a port number (1–65535), got "eighty" (it sets the default --url)\n']);
  });

  it("refuses a path in --url instead of dropping it", async () => {
    const result = await ackbox(["backlog", "--url", `${closed}/admin`]);
    expect([result.code, result.err]).toEqual([
      2,
      `ackbox: --url is the ingress's origin only (the CLI adds /admin/…): use ${closed}, without "/admin"\n`,
    ]);
    expect((await ackbox(["backlog", "--url", `${closed}/?x=1`])).code).toBe(2);
    expect((await ackbox(["backlog", "--url", `${closed}/`, "--timeout", "1"])).code).toBe(3); // a bare trailing slash is the origin
  });
});
