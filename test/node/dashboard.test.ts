/**
 * The dashboard (GET /admin) in a real headless Chromium (Debian's, driven
 * by playwright-core), against a running local instance with seeded rows and
 * an hour of backlog samples. Keeps a screenshot in test-artifacts/.
 *
 * Chromium is installed by scripts/ensure-chromium.sh when missing; if it
 * cannot be, this file fails (never skips).
 */
import { execFileSync } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalIngress, ROOT, SEED_IDS, seedSql, startLocalIngress } from "../support/ops-local.mts";

const TOKEN = "dashboard-test-token-41b2c8e07fa9d356";
const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = join(ROOT, "test-artifacts");
/** TOOLCHAIN.md: without the background-networking flags Chromium floods a closed network with refused connections. */
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const HOSTILE_ERROR = `chat.postMessage: <img src=x onerror="document.body.dataset.pwned='yes'"> & "quotes"`;

/** Clicks Replay selected and answers its question no; returns the question asked. */
async function replayDeclined(page: Page): Promise<string[]> {
  const asked: string[] = [];
  page.once("dialog", (dialog) => {
    asked.push(dialog.message());
    void dialog.dismiss();
  });
  await page.click("#replay");
  await page.waitForFunction(() => (document.getElementById("result")?.textContent ?? "").includes("cancelled"));
  return asked;
}

describe("the dashboard in Chromium", { timeout: 60_000 }, () => {
  let local: LocalIngress;
  let browser: Browser;
  let page: Page;
  const consoleErrors: string[] = [];
  const foreignRequests: string[] = [];
  /** The clock the rows were seeded by: the ages below are explicit about it. */
  let seededAt: number;

  beforeAll(async () => {
    execFileSync("bash", [join(ROOT, "scripts/ensure-chromium.sh")], { stdio: "inherit", timeout: 600_000 });
    const now = Date.now();
    seededAt = now;
    const hostile = `INSERT INTO outbox (id, idempotency_key, receipt_id, team_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at, last_error)
      VALUES (107, 'EvOPS0HOSTILE:reply', 'EvOPS0HOSTILE', 'T0OPS', 'chat.postMessage', '{}', 'dead', 1, ${now - 7_200_000}, ${now - 7_200_000}, ${now - 7_200_000}, ${now - 7_200_000}, '${HOSTILE_ERROR.replace(/'/g, "''")}');\n`;
    // Parked after a timed-out attempt: its effect may have happened (maybe_performed), the oldest dead row.
    const maybe = `INSERT INTO outbox (id, idempotency_key, receipt_id, team_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at, last_error, maybe_performed)
      VALUES (108, 'EvOPS0MAYBE:reply', 'EvOPS0MAYBE', 'T0OPS', 'chat.postMessage', '{}', 'dead', 2, ${now - 8_000_000}, ${now - 8_000_000}, ${now - 8_000_000}, ${now - 8_000_000}, 'chat.postMessage: no result within 10000 ms', 1);\n`;
    const blocked = `INSERT INTO installations (install_key, team_id, is_enterprise_install, scopes, installed_at, updated_at, key_id, bot_token, blocked_reason, blocked_at)
      VALUES ('T:T0BLOCKED', 'T0BLOCKED', 0, 'chat:write', ${now}, ${now}, '0a1b2c3d', 'sealed', 'token_revoked', ${now}),
             ('T:T0FINE', 'T0FINE', 0, 'chat:write', ${now}, ${now}, '0a1b2c3d', 'sealed', NULL, NULL);\n`;
    local = await startLocalIngress({ adminToken: TOKEN, seed: seedSql(now, 60) + hostile + maybe + blocked });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1280, height: 1500 } });
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(message.text());
    });
    page.on("pageerror", (error) => consoleErrors.push(String(error)));
    page.on("request", (request) => {
      if (!request.url().startsWith(local.url)) foreignRequests.push(request.url());
    });
  }, 900_000);

  afterAll(async () => {
    await browser?.close();
    await local?.stop();
  }, 60_000);

  it("asks for the token, and says so when it is wrong", async () => {
    await page.goto(`${local.url}/admin`);
    expect(await page.textContent("#status")).toBe("Paste the ADMIN_TOKEN to begin.");
    await page.fill("#token", "not-the-token");
    await page.click("#save");
    await page.waitForSelector("body[data-loaded='error']");
    expect(await page.textContent("#status")).toBe("401: wrong or missing token");
    expect(await page.inputValue("#token")).toBe("");
  });

  it("with the token, shows health, figures, the backlog over time and the dead rows", async () => {
    await page.fill("#token", TOKEN);
    await page.click("#save");
    await page.waitForSelector("body[data-loaded='true']");

    expect(await page.textContent("#health")).toBe("Unhealthy: oldest_pending, new_dead");
    const tile = async (label: string) => page.textContent(`[data-tile="${label}"] .value`);
    expect(await tile("Pending")).toBe("1");
    expect(await tile("Leased")).toBe("1");
    expect(await tile("Dead")).toBe("5");
    expect(await tile("Stale leases")).toBe("1");
    expect(await tile("Queue backlog")).toBe("0");
    // Seeded 700 s (11.7 min) before seededAt: its age is that plus however long the start and the tests took.
    const minutes = Number(/^(\d+) min$/.exec((await tile("Oldest pending")) ?? "")?.[1]);
    expect(minutes).toBeGreaterThanOrEqual(11);
    expect(minutes).toBeLessThanOrEqual(Math.ceil((700_000 + Date.now() - seededAt) / 60_000));

    // One polyline per series, one point per sample (60 samples, a minute apart, within the 6 h shown).
    const series = await page.$$eval("#chart polyline", (lines) =>
      lines.map((l) => ({ key: l.getAttribute("data-series"), points: (l.getAttribute("points") ?? "").trim().split(" ").length })),
    );
    expect(series).toEqual([
      { key: "pending", points: 60 },
      { key: "leased", points: 60 },
      { key: "dead", points: 60 },
    ]);
    expect(await page.textContent("#chart .legend")).toContain("60 samples");
    // The seeded backlog peaks at 41 pending: the y axis tops out there.
    expect(await page.$$eval("#chart text", (texts) => texts.map((t) => t.textContent))).toContain("41");

    const rows = await page.$$eval("#dead-rows tr", (trs) => trs.map((tr) => Number(tr.getAttribute("data-id"))));
    expect(rows).toEqual([SEED_IDS.deadChannelOtherTeam, SEED_IDS.deadExhausted, SEED_IDS.deadChannel, 107, 108]);

    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "dashboard.png"), fullPage: true });
  });

  it("draws one sample's axes with each label once: 0 and the top on the y axis, one minute on the x axis", async () => {
    // The backlog as the ingress answers it, its history cut to one sample of 1 pending.
    await page.route("**/admin/backlog?*", async (route) => {
      const response = await route.fetch();
      const body = (await response.json()) as { at: string; history: Record<string, unknown>[] };
      body.history = [{ ...body.history.at(-1), at: body.at, pending: 1, leased: 0, dead: 0 }];
      await route.fulfill({ response, json: body });
    });
    try {
      await page.reload();
      await page.waitForSelector("body[data-loaded='true']");
      const labels = await page.$$eval("#chart text", (texts) => texts.map((t) => t.textContent));
      expect(labels).toEqual(["0", "1", expect.stringMatching(/^\d\d:\d\d UTC$/)]);
      expect(await page.textContent("#chart .legend")).toContain("1 samples");
    } finally {
      await page.unroute("**/admin/backlog?*");
    }
  });

  it("keeps the token for this tab only, unless asked to remember it on this device; Forget forgets both", async () => {
    // A browser of its own: its tabs share localStorage, each has its own sessionStorage.
    const context = await browser.newContext();
    const opened = async () => {
      const tab = await context.newPage();
      await tab.goto(`${local.url}/admin`);
      await tab.waitForFunction(
        () => document.body.dataset.loaded === "true" || /Paste/.test(document.getElementById("status")?.textContent ?? ""),
      );
      return tab;
    };
    const signIn = async (tab: Page, remember: boolean) => {
      await tab.setChecked("#remember", remember);
      await tab.fill("#token", TOKEN);
      await tab.click("#save");
      await tab.waitForSelector("body[data-loaded='true']");
    };
    try {
      // Not remembered: a second tab asks again, and nothing is on disk.
      const first = await opened();
      await signIn(first, false);
      let tab = await opened();
      expect(await tab.textContent("#status")).toBe("Paste the ADMIN_TOKEN to begin.");
      expect(await tab.evaluate(() => localStorage.length)).toBe(0);
      // Remembered: a new tab opens signed in.
      await signIn(tab, true);
      await tab.close();
      tab = await opened();
      expect(await tab.evaluate(() => document.body.dataset.loaded)).toBe("true");
      expect(await tab.isChecked("#remember")).toBe(true);
      // Forget: gone from this device, so the next tab asks again.
      await Promise.all([tab.waitForEvent("load"), tab.click("#forget")]);
      tab = await opened();
      expect(await tab.textContent("#status")).toBe("Paste the ADMIN_TOKEN to begin.");
      expect(await tab.isChecked("#remember")).toBe(false);
    } finally {
      await context.close();
    }
  });

  it("shows which teams' installations are blocked, and why", async () => {
    expect(await page.textContent("#blocked")).toContain("2 installation(s), 1 blocked");
    expect(await page.textContent("#blocked li[data-install='T:T0BLOCKED']")).toBe(
      "T0BLOCKED: token_revoked — its rows wait until it is re-installed",
    );
    expect(await page.$$("#blocked li")).toHaveLength(1);
  });

  it("shows text from the database as text, never as markup", async () => {
    const cell = await page.textContent("#dead-rows tr[data-id='107'] td.error");
    expect(cell).toBe(HOSTILE_ERROR);
    expect(await page.$$("#dead-rows img")).toHaveLength(0);
    expect(await page.evaluate(() => document.body.dataset.pwned)).toBeUndefined();
  });

  it("shows an event's audit trail on click", async () => {
    await page.click("#dead-rows a[data-receipt='EvOPS0DEAD1']");
    await page.waitForFunction(() => (document.getElementById("trail")?.textContent ?? "").includes('"receipt"'));
    const trail = JSON.parse((await page.textContent("#trail")) ?? "{}");
    expect(trail).toMatchObject({ id: "EvOPS0DEAD1", complete: false, rows: [{ id: SEED_IDS.deadChannel, status: "dead" }] });
    expect(trail.rows[0].history[0]).toMatchObject({ outcome: "dead", error: "chat.postMessage: channel_not_found" });
  });

  it("replays selected rows: a dry run, then Replay selected shows the count and asks; only a yes replays", async () => {
    await page.check(`#dead-rows tr[data-id='${SEED_IDS.deadChannel}'] input[type=checkbox]`);
    await page.click("#dryrun");
    await page.waitForFunction(() => (document.getElementById("result")?.textContent ?? "").startsWith("Dry run"));
    expect(await page.textContent("#result")).toBe("Dry run: would replay 1 row(s).");
    expect(await page.$$eval("#dead-rows tr", (trs) => trs.length)).toBe(5);

    // "Replay selected" shows the dry run's count and asks; a no changes nothing.
    const asked = await replayDeclined(page);
    expect(asked).toEqual(["Replay 1 dead row(s)? Their effects are sent to Slack again."]);
    expect(await page.textContent("#result")).toBe("Dry run: would replay 1 row(s). Replay cancelled: nothing changed.");
    expect(await page.$$eval("#dead-rows tr", (trs) => trs.length)).toBe(5);

    page.once("dialog", (dialog) => void dialog.accept());
    await page.click("#replay");
    await page.waitForFunction(() => (document.getElementById("result")?.textContent ?? "").startsWith("Replayed"));
    expect(await page.textContent("#result")).toBe("Replayed 1 row(s).");
    await page.waitForFunction((id) => !document.querySelector(`#dead-rows tr[data-id='${id}']`), SEED_IDS.deadChannel);
    expect(await page.$$eval("#dead-rows tr", (trs) => trs.map((tr) => Number(tr.getAttribute("data-id"))))).toEqual([
      SEED_IDS.deadChannelOtherTeam,
      SEED_IDS.deadExhausted,
      107,
      108,
    ]);
  });

  it("Replay selected says how many of the ticked rows may have been performed already, before it asks", async () => {
    expect(await page.textContent("#dead-rows tr[data-id='108'] td.error")).toBe(
      "[may have been performed] chat.postMessage: no result within 10000 ms",
    );
    await page.check("#dead-rows tr[data-id='108'] input[type=checkbox]");
    await page.check("#dead-rows tr[data-id='107'] input[type=checkbox]");
    const asked = await replayDeclined(page);
    expect(asked).toEqual([
      "Replay 2 dead row(s)? Their effects are sent to Slack again. 1 of them may have been performed already (marked [may have been performed]): if they were, Slack gets them twice. Check each with its audit trail first.",
    ]);
    expect(await page.$$eval("#dead-rows tr", (trs) => trs.length)).toBe(4);
  });

  it("ran no script but its own, and talked to no other origin", () => {
    expect(consoleErrors.filter((e) => !e.includes("401"))).toEqual([]);
    expect(foreignRequests).toEqual([]);
  });
});
