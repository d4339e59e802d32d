/** `npm run manifest`: the script's arguments and output (the manifest's content: examples/reference/manifest.test.ts). */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { REFERENCE_APP } from "./support/apps.ts";

/** The script over the reference app as shipped (ACKBOX_APP), whose events it subscribes, whatever app/index.ts is. */
const manifest = (...args: string[]) =>
  spawnSync(process.execPath, ["cli/project/manifest.ts", ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env: { ...process.env, ACKBOX_APP: REFERENCE_APP },
  });

describe("npm run manifest", () => {
  it("prints the app's manifest as JSON, every URL on the given host's /slack/events", () => {
    const { status, stdout, stderr } = manifest("--url", "https://ackbox.example.test");
    // No warning; what the app needs that no field sets, noted: its custom steps' org-level install.
    expect(stderr).toBe(
      "manifest: note: custom steps (ackbox_approval, ackbox_echo): Slack requires the app to be org-ready (org_deploy_enabled, set here) and installed at the organisation level by an org admin; Slack's workflow steps guide says how such an app may be distributed\n",
    );
    expect(status).toBe(0);
    const printed = JSON.parse(stdout) as { settings: { event_subscriptions: { request_url: string } } };
    expect(printed.settings.event_subscriptions.request_url).toBe("https://ackbox.example.test/slack/events");
  });

  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it("--out writes the JSON to the file, even through npm, whose own banner goes to stdout", () => {
    dir = mkdtempSync(join(tmpdir(), "ackbox-manifest-"));
    const out = join(dir, "manifest.json");
    const npm = spawnSync("npm", ["run", "manifest", "--", "--url", "https://ackbox.example.test", "--out", out], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(npm.status).toBe(0);
    expect(npm.stdout).toContain("> ackbox@"); // why `npm run manifest > file` is not JSON
    expect(npm.stderr).toContain(`manifest: wrote ${out}`);
    const written = JSON.parse(readFileSync(out, "utf8")) as { display_information: { name: string } };
    expect(written.display_information.name).toBe("ackbox");
  });

  it("--distributed adds the redirect URL and the lifecycle events", () => {
    const { status, stdout } = manifest("--url", "https://ackbox.example.test", "--distributed");
    expect(status).toBe(0);
    const printed = JSON.parse(stdout) as {
      oauth_config: { redirect_urls: string[] };
      settings: { event_subscriptions: { bot_events: string[] } };
    };
    expect(printed.oauth_config.redirect_urls).toEqual(["https://ackbox.example.test/slack/oauth_redirect"]);
    expect(printed.settings.event_subscriptions.bot_events).toEqual(expect.arrayContaining(["app_uninstalled", "tokens_revoked"]));
  });

  it("says it cannot write --out, with exit 1", () => {
    const { status, stderr, stdout } = manifest("--url", "https://ackbox.example.test", "--out", "/nonexistent-dir/manifest.json");
    expect(status).toBe(1);
    expect(stderr).toContain("manifest: cannot write /nonexistent-dir/manifest.json");
    expect(stdout).toBe("");
  });

  it.each([[[]], [["--url", "http://plain.example"]], [["--bogus"]], [["--url", "https://a.test", "--out", ""]]])(
    "refuses %j with exit 2 and the usage",
    (args) => {
      const { status, stderr } = manifest(...args);
      expect(status).toBe(2);
      expect(stderr).toContain("Usage: npm run manifest -- --url https://");
    },
  );
});
