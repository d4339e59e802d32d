/**
 * The CLI never writes a remote text's control characters to a terminal:
 * main() driven in-process against a stand-in operator API whose answers
 * carry escape sequences, C1 controls and a bidi override. --json stays exact.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { printable } from "../../cli/printable.ts";
import { runCli, serveJson } from "./support/cli-in-process.ts";

// An OSC retitle, a screen clear, a C1 CSI, a carriage return that would overwrite the line, and a right-to-left override.
const HOSTILE = "boom \x1b]0;pwned\x07\x1b[2J\x9b31m\rfake line \u202edecoy";
const ISO = "2026-11-30T12:00:00.000Z";

const deadPage = {
  rows: [
    {
      id: 7,
      receiptId: `Ev${HOSTILE}`,
      teamId: "T1",
      effect: "chat.postMessage",
      attempts: 3,
      lastError: `chat.postMessage: HTTP 400 ${HOSTILE}`,
      createdAt: ISO,
      diedAt: ISO,
      expiresAt: null,
      payload: { channel: "C1", text: HOSTILE },
    },
  ],
  nextCursor: null,
};
const trail = {
  id: "Ev1",
  receipt: { id: "Ev1", kind: "event", type: "app_mention", teamId: "T1", retryNum: null, receivedAt: ISO },
  complete: false,
  rows: [
    {
      id: 7,
      key: "Ev1:reply",
      effect: "chat.postMessage",
      status: "dead",
      attempts: 3,
      lastError: HOSTILE,
      payload: { channel: "C1", text: HOSTILE },
      result: null,
      createdAt: ISO,
      enqueuedAt: ISO,
      nextAttemptAt: ISO,
      leaseExpiresAt: null,
      deadline: null,
      completedAt: ISO,
      sweeps: 0,
      history: [{ attempt: 1, outcome: "retry", error: HOSTILE, startedAt: ISO, finishedAt: ISO }],
    },
  ],
};

let served: Awaited<ReturnType<typeof serveJson>>;
beforeAll(async () => {
  served = await serveJson((path) =>
    path.startsWith("/admin/dead")
      ? [200, JSON.stringify(deadPage)]
      : path.startsWith("/admin/events/Ev1")
        ? [200, JSON.stringify(trail)]
        : [500, JSON.stringify({ error: HOSTILE })],
  );
});
afterAll(() => served.close());

function run(...argv: string[]) {
  return runCli({ argv: [...argv, "--url", served.url], env: { ACKBOX_ADMIN_TOKEN: "cli-printable-token-0123456789abcdef" }, isTty: true });
}

// Any C0 control but newline and tab, DEL, C1, or a bidi control.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for exactly these
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe("the CLI's human output is printable", () => {
  it.each([
    ["dead list", ["dead", "list"]],
    ["events show", ["events", "show", "Ev1"]],
  ])("%s shows the hostile text as visible escapes, never raw", async (_, argv) => {
    const { code, out } = await run(...argv);
    expect(code).toBe(0);
    expect(out).not.toMatch(CONTROL);
    expect(out).toContain("\\x1b]0;pwned");
    expect(out).toContain("\\u202edecoy");
  });

  it("makes a server's error text printable on stderr too", async () => {
    const { code, err } = await run("events", "show", "Ev2");
    expect(code).toBe(1);
    expect(err).not.toMatch(CONTROL);
    expect(err).toContain("\\x9b31m");
  });

  it("keeps --json exact: the parsed output is the server's answer, byte for byte in meaning", async () => {
    const dead = await run("dead", "list", "--json");
    expect(JSON.parse(dead.out)).toEqual(deadPage);
    const shown = await run("events", "show", "Ev1", "--json");
    expect(JSON.parse(shown.out)).toEqual(trail);
    // C1 and bidi characters are valid JSON string content; --json does not touch them.
    expect(shown.out).toContain("\u202e");
  });

  it("printable() leaves newlines, tabs and ordinary Unicode alone", () => {
    expect(printable("a\tb\nc héllo 👋 ✓")).toBe("a\tb\nc héllo 👋 ✓");
    expect(printable("\x00\x1b\x7f\x85\u200f")).toBe("\\x00\\x1b\\x7f\\x85\\u200f");
  });
});
