/**
 * `npx ackbox backfill`, in process, against a stand-in operator API that pages
 * as POST /admin/backfill does (test/ingress/admin.backfill.test.ts proves the
 * real endpoint against a fake Slack that pages as conversations.history does).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { BackfillAnswer, BackfillBody, BackfillChannelsAnswer, BackfillChannelsBody } from "../../shared/ops/backfill-answer.ts";
import { runCli } from "./support/cli-in-process.ts";

const page = (over: Partial<Extract<BackfillAnswer, { read: number }>>): BackfillAnswer => ({
  channel: "C0LOST",
  dryRun: false,
  read: 15,
  alreadyHandled: 0,
  recorded: 0,
  ignored: 0,
  refused: [],
  nextCursor: null,
  channelType: "channel",
  ...over,
});

let answers: [number, BackfillAnswer | Record<string, unknown>][] = [];
const bodies: BackfillBody[] = [];
/** POST /admin/backfill/channels: the listing --all-channels walks. */
let listings: [number, BackfillChannelsAnswer | Record<string, unknown>][] = [];
const listed: BackfillChannelsBody[] = [];
let url = "";
let close = () => Promise.resolve();
beforeAll(async () => {
  const server = createServer((request, response) => {
    let text = "";
    request.on("data", (chunk) => {
      text += chunk;
    });
    request.on("end", () => {
      if (request.url === "/admin/backfill/channels" && request.method === "POST") {
        listed.push(JSON.parse(text) as BackfillChannelsBody);
        const [status, body] = listings.shift() ?? [500, { error: "no more scripted listings" }];
        return response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      }
      if (request.url !== "/admin/backfill" || request.method !== "POST") return response.writeHead(404).end("{}");
      bodies.push(JSON.parse(text) as BackfillBody);
      const [status, body] = answers.shift() ?? [500, { error: "no more scripted answers" }];
      response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise<void>((resolve) => server.close(() => resolve()));
});
afterAll(() => close());
beforeEach(() => {
  answers = [];
  bodies.length = 0;
  listings = [];
  listed.length = 0;
});

async function run(...argv: string[]) {
  const slept: number[] = [];
  const result = await runCli({
    argv: [...argv, "--url", url],
    env: { ACKBOX_ADMIN_TOKEN: "cli-backfill-token-0123456789abcdef" },
    isTty: false,
    sleep: async (ms) => {
      slept.push(ms);
    },
  });
  return { ...result, slept };
}

describe("npx ackbox backfill", () => {
  it("walks every page with the cursor each answer gives, pacing --interval apart, and sums them up", async () => {
    answers = [
      [200, page({ read: 15, alreadyHandled: 9, recorded: 7, ignored: 1, nextCursor: "c2" })],
      [200, page({ read: 15, alreadyHandled: 15, recorded: 1, nextCursor: "c3" })],
      [200, page({ read: 4, recorded: 4 })],
    ];
    const { code, out, err, slept } = await run(
      "backfill",
      "--channel",
      "C0LOST",
      "--since",
      "2025-11-30T12:00:00Z",
      "--until",
      "1764507600.000000",
    );
    expect(code).toBe(0);
    expect(bodies.map((b) => b.cursor)).toEqual([undefined, "c2", "c3"]);
    expect(bodies[0]).toEqual({ channel: "C0LOST", oldest: "1764504000.000000", latest: "1764507600.000000", limit: 15, dryRun: false });
    expect(slept).toEqual([60_000, 60_000]);
    expect(err).toContain("backfill: page 1: 15 messages read; 9 already handled, 7 recorded, 1 ignored by the app");
    expect(err).toContain("backfill: page 3: 4 messages read; 0 already handled, 4 recorded, 0 ignored by the app");
    expect(out).toContain("backfill of C0LOST from 1764504000.000000 to 1764507600.000000: 3 pages");
    expect(out).toMatch(/read\s+34 messages/);
    expect(out).toMatch(/already handled\s+24 events/);
    expect(out).toMatch(/recorded\s+12 events/);
    expect(out).toMatch(/ignored by app\s+1 events/);
  });

  it("passes on the channel's type the first page answered, so Slack is asked it once a run", async () => {
    answers = [
      [200, page({ read: 15, recorded: 15, nextCursor: "c2", channelType: "group" })],
      [200, page({ read: 3, recorded: 3, channelType: "group" })],
    ];
    const { code } = await run("backfill", "--channel", "C0LOST", "--since", "1764504000", "--interval", "1");
    expect(code).toBe(0);
    expect(bodies.map((b) => b.channelType)).toEqual([undefined, "group"]);
  });

  it("refuses a --limit above the page's bound (16: a page's D1 work stays under the invocation's limit)", async () => {
    const { code, err } = await run("backfill", "--channel", "C0LOST", "--since", "1764504000", "--limit", "17");
    expect(code).toBe(2);
    expect(err).toContain("--limit");
    expect(bodies).toEqual([]);
  });

  it("on a rate limit waits Slack's Retry-After and asks for the same page again", async () => {
    answers = [
      [200, page({ read: 15, recorded: 15, nextCursor: "c2" })],
      [200, { channel: "C0LOST", dryRun: false, retryAfterSeconds: 42 }],
      [200, page({ read: 3, recorded: 3 })],
    ];
    const { code, err, slept } = await run("backfill", "--channel", "C0LOST", "--since", "1764504000", "--interval", "1");
    expect(code).toBe(0);
    expect(bodies.map((b) => b.cursor)).toEqual([undefined, "c2", "c2"]);
    expect(bodies.map((b) => b.channelType)).toEqual([undefined, "channel", "channel"]);
    expect(slept).toEqual([1_000, 42_000]);
    expect(err).toContain("Slack rate-limited conversations.history: waiting 42 s (Retry-After), then page 2 again");
  });

  it("stops with exit 1 (failed) when an answer gives a cursor it already walked, rather than paging for ever", async () => {
    answers = [
      [200, page({ read: 15, recorded: 15, nextCursor: "c2" })],
      [200, page({ read: 15, alreadyHandled: 15, nextCursor: "c3" })],
      [200, page({ read: 15, alreadyHandled: 15, nextCursor: "c2" })],
      [200, page({ read: 15 })],
    ];
    const { code, err } = await run("backfill", "--channel", "C0LOST", "--since", "1764504000", "--interval", "1");
    expect(code).toBe(1);
    expect(bodies.map((b) => b.cursor)).toEqual([undefined, "c2", "c3"]);
    expect(err).toContain("page 3 gave a cursor already walked");
  });

  it("--dry-run asks for a dry run and says nothing was written; --json prints one summary document", async () => {
    answers = [[200, page({ dryRun: true, read: 2, alreadyHandled: 1, recorded: 1 })]];
    const { code, out } = await run("backfill", "--channel", "C0LOST", "--since", "1764504000", "--dry-run", "--json");
    expect(code).toBe(0);
    expect(bodies[0]?.dryRun).toBe(true);
    expect(JSON.parse(out)).toEqual({
      channel: "C0LOST",
      since: "1764504000",
      until: null,
      dryRun: true,
      pages: 1,
      read: 2,
      alreadyHandled: 1,
      recorded: 1,
      ignored: 0,
      refused: [],
    });
    answers = [[200, page({ dryRun: true, read: 2, recorded: 2 })]];
    expect((await run("backfill", "--channel", "C0LOST", "--since", "1764504000", "--dry-run")).out).toContain(
      "(dry run: nothing written)",
    );
  });

  it("a channel the bot cannot read is a clear error, exit 2", async () => {
    answers = [
      [
        400,
        {
          error: "the bot is not a member of C0LOST: invite it (/invite @your-app in the channel) and run the backfill again",
          slackError: "not_in_channel",
        },
      ],
    ];
    const { code, err } = await run("backfill", "--channel", "C0LOST", "--since", "1764504000");
    expect(code).toBe(2);
    expect(err).toContain("refused: the bot is not a member of C0LOST: invite it");
  });

  it("refuses a command line without a channel or a start, or with a time it cannot read, before calling anything", async () => {
    for (const argv of [
      ["backfill", "--since", "1764504000"],
      ["backfill", "--channel", "C0LOST"],
      ["backfill", "--channel", "general", "--since", "1764504000"],
      ["backfill", "--channel", "C0LOST", "--since", "yesterday"],
      ["backfill", "--channel", "C0LOST", "--since", "1764504000", "--until", "1764400000"],
    ]) {
      expect((await run(...argv)).code).toBe(2);
    }
    expect(bodies).toEqual([]);
  });

  it("--help says what it does, its options and its limits", async () => {
    const { code, out } = await run("backfill", "--help");
    expect(code).toBe(0);
    expect(out).toContain("Usage: npx ackbox backfill --channel <C…> | --all-channels --since <time>");
    expect(out).toContain("--all-channels     every conversation the bot is a member of");
    expect(out).toContain("--dry-run");
    expect(out).toContain("one\n                     conversations.history call a minute");
  });

  it("--all-channels walks every conversation the bot is in, each with the type the listing gave, paced across channels; one it may not read is skipped and named (exit 1)", async () => {
    listings = [
      [200, { channels: [{ id: "C0PUB", channelType: "channel" }], unknown: [], nextCursor: "l2" }],
      [200, { retryAfterSeconds: 5 }],
      [
        200,
        {
          channels: [
            { id: "G0PRIV", channelType: "group" },
            { id: "D0DM", channelType: "im" },
          ],
          unknown: ["C0ODD"],
          nextCursor: null,
        },
      ],
    ];
    answers = [
      [200, page({ channel: "C0PUB", read: 2, recorded: 2, nextCursor: "c2" })],
      [200, page({ channel: "C0PUB", read: 1, alreadyHandled: 1 })],
      [200, page({ channel: "G0PRIV", read: 3, recorded: 3, channelType: "group" })],
      [400, { error: "conversations.history needs a scope the app lacks (…im:history…)", slackError: "missing_scope" }],
    ];
    const { code, err, slept, out } = await run(
      "backfill",
      "--all-channels",
      "--since",
      "1764504000",
      "--interval",
      "2",
      "--team",
      "T0TEAM",
    );
    expect(code).toBe(1);
    expect(listed).toEqual([{ team: "T0TEAM" }, { team: "T0TEAM", cursor: "l2" }, { team: "T0TEAM", cursor: "l2" }]);
    expect(bodies.map((b) => [b.channel, b.cursor, b.channelType])).toEqual([
      ["C0PUB", undefined, "channel"],
      ["C0PUB", "c2", "channel"],
      ["G0PRIV", undefined, "group"],
      ["D0DM", undefined, "im"],
    ]);
    // The listing's 429 waited out; then every history read after the first, across channels too, --interval apart.
    expect(slept).toEqual([5_000, 2_000, 2_000, 2_000]);
    expect(err).toContain("backfill: 3 conversations the bot is a member of");
    expect(err).toContain("C0ODD skipped: Slack did not say what kind of conversation it is");
    expect(err).toContain("backfill: channel 3 of 3: D0DM");
    expect(err).toContain("D0DM skipped: refused: conversations.history needs a scope");
    expect(out).toContain("backfill of 3 conversations from 1764504000 to now: 3 pages");
    expect(out).toMatch(/read\s+6 messages/);
    expect(out).toMatch(/skipped\s+1 conversations the bot could not read/);
  });

  it("refuses --channel with --all-channels, and neither, before calling anything", async () => {
    expect((await run("backfill", "--channel", "C0LOST", "--all-channels", "--since", "1764504000")).code).toBe(2);
    expect((await run("backfill", "--since", "1764504000")).err).toContain("--all-channels");
    expect(bodies).toEqual([]);
    expect(listed).toEqual([]);
  });
});
