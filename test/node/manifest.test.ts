/** `npm run manifest`: the script's arguments and output (the manifest's content: examples/reference/manifest.test.ts). */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const manifest = (...args: string[]) =>
  spawnSync(process.execPath, ["scripts/manifest.ts", ...args], { encoding: "utf8", timeout: 30_000 });

describe("npm run manifest", () => {
  it("prints the app's manifest as JSON, every URL on the given host's /slack/events", () => {
    const { status, stdout, stderr } = manifest("--url", "https://ackbox.example.test");
    expect(stderr).toBe("");
    expect(status).toBe(0);
    const printed = JSON.parse(stdout) as { settings: { event_subscriptions: { request_url: string } } };
    expect(printed.settings.event_subscriptions.request_url).toBe("https://ackbox.example.test/slack/events");
  });

  it.each([[[]], [["--url", "http://plain.example"]], [["--bogus"]]])("refuses %j with exit 2 and the usage", (args) => {
    const { status, stderr } = manifest(...args);
    expect(status).toBe(2);
    expect(stderr).toContain("Usage: npm run manifest -- --url https://");
  });
});
