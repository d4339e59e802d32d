/**
 * Long effects (an assistant's answer streams for minutes): one attempt that outlives EFFECT_TIMEOUT_SECONDS by
 * renewing its lease through the fence, ended when it stops renewing or reaches its longest time; and an effect's
 * not_yet, which gives its attempt back. The claim, the fence and the clock rule are the outbox's own.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch, LONG_AT_ONCE, LONG_MIN_MS, LongBounds } from "../../shared/delivery/deliver.ts";
import { notYet } from "../../shared/delivery/failure.ts";
import type { AttemptContext, EffectDefinition } from "../../shared/effects/effect.ts";
import { type ClaimLease, leaseOf } from "../../shared/effects/lease.ts";
import { effectRegistry } from "../../shared/effects/registry.ts";
import { leaseHeldSql } from "../../shared/outbox/fence.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

beforeEach(() => resetTables(env.DB));

const LEASE_MS = 300_000;

function longEffect(perform: (ctx: AttemptContext) => Promise<unknown>, maxMs = 600_000): EffectDefinition {
  return { name: "long_test", idempotentByShape: false, long: { maxMs }, perform: (_payload, ctx) => perform(ctx) };
}

function depsWith(effect: EffectDefinition) {
  return deliveryDeps(NOW, { effects: effectRegistry([effect]), settings: { leaseMs: LEASE_MS } });
}

const pending = () => insertRow(env.DB, { status: "pending", effect: "long_test", payload: {}, nextAttemptAt: NOW - 1 });

/** A statement that rides in a renewal: marks the row's last_error, only while the claim holds. */
const mark = (ctx: AttemptContext, text: string) =>
  leaseOf(ctx)
    ?.db.prepare(`UPDATE outbox SET last_error = ?3 WHERE id = ?1 AND ${leaseHeldSql("?1", "?2")}`)
    .bind((leaseOf(ctx) as ClaimLease).rowId, (leaseOf(ctx) as ClaimLease).claimToken, text) as D1PreparedStatement;

describe("a long effect", () => {
  it("runs past the effect timeout while it renews, each renewal ending a lease after the clock read at it", async () => {
    const seen: number[] = [];
    const { deps, clock } = depsWith(
      longEffect(async (ctx) => {
        expect(leaseOf(ctx)).toBeDefined();
        for (let i = 0; i < 3; i++) {
          clock.advance(240_000); // four minutes a step: past EFFECT_TIMEOUT_SECONDS and most of a lease
          const renewedAt = clock();
          expect(await leaseOf(ctx)?.renew()).toBeDefined();
          seen.push(renewedAt);
          expect(leaseOf(ctx)?.expiresAt()).toBe(renewedAt + LEASE_MS);
        }
        return { done: true };
      }),
    );
    const id = await pending();
    const actions = await deliverBatch(deps, [id]);
    expect(actions.get(id)).toEqual({ action: "ack" });
    const row = await readRow(env.DB, id);
    expect(row.status).toBe("done");
    expect(row.attempts).toBe(1);
    expect(seen).toEqual([NOW + 240_000, NOW + 480_000, NOW + 720_000]);
  });

  it("writes what rides in a renewal only while the claim holds; a renewal after another claim took the row is refused", async () => {
    let second: unknown = "unset";
    const { deps } = depsWith(
      longEffect(async (ctx) => {
        expect(await leaseOf(ctx)?.renew([mark(ctx, "progress 1")])).toBeDefined();
        // Another worker claims the row (its lease was taken as expired): this attempt's claim is gone.
        await env.DB.prepare("UPDATE outbox SET claim_token = 'someone-else' WHERE id = ?").bind(leaseOf(ctx)?.rowId).run();
        second = await leaseOf(ctx)?.renew([mark(ctx, "progress 2")]);
        return null;
      }),
    );
    const id = await pending();
    await deliverBatch(deps, [id]);
    expect(second).toBeUndefined();
    const row = await readRow(env.DB, id);
    // The lost renewal wrote nothing, and the completion was fenced out too: the other claim owns the row.
    expect(row.last_error).toBe("progress 1");
    expect(row.status).toBe("leased");
    expect(row.claim_token).toBe("someone-else");
  });

  it("is ended (its signal aborted) a call's timeout before its lease ends, when it stops renewing: retried, never overlapping the next claim", async () => {
    let abortedWith: unknown;
    let endsAt = 0;
    const effect = longEffect(async (ctx) => {
      endsAt = leaseOf(ctx)?.expiresAt() ?? 0;
      await new Promise((_, reject) =>
        ctx.signal.addEventListener("abort", () => {
          abortedWith = ctx.signal.reason;
          reject(ctx.signal.reason);
        }),
      );
    });
    // A lease 150 ms longer than one call's timeout (EFFECT_TIMEOUT_SECONDS): the attempt may start, and is
    // ended 150 ms later, a whole timeout before its lease would have ended.
    const { deps } = deliveryDeps(NOW, { effects: effectRegistry([effect]), settings: { leaseMs: 10_150, effectTimeoutMs: 10_000 } });
    const id = await pending();
    const actions = await deliverBatch(deps, [id]);
    expect(endsAt).toBe(NOW + 10_150);
    expect((abortedWith as Error).name).toBe("TimeoutError");
    expect(String((abortedWith as Error).message)).toMatch(/lease was not renewed/);
    expect(actions.get(id)?.action).toBe("retry");
    const row = await readRow(env.DB, id);
    expect(row.status).toBe("pending");
    expect(row.last_error).toMatch(/lease was not renewed/);
  });

  it("a renewal re-arms the end: an attempt that renews outlives its first lease", async () => {
    const renewals: boolean[] = [];
    const effect = longEffect(async (ctx) => {
      for (let i = 0; i < 3; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        renewals.push((await leaseOf(ctx)?.renew()) !== undefined && !ctx.signal.aborted);
      }
      return null;
    });
    // Each lease leaves 150 ms of real time; the attempt takes about 300 ms, renewing every 100 ms.
    const { deps } = deliveryDeps(NOW, { effects: effectRegistry([effect]), settings: { leaseMs: 10_150, effectTimeoutMs: 10_000 } });
    const id = await pending();
    await deliverBatch(deps, [id]);
    expect(renewals).toEqual([true, true, true]);
    expect((await readRow(env.DB, id)).status).toBe("done");
  });

  it("does not hold back the batch's other rows' answers: each row is settled as soon as it is done", async () => {
    const order: string[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const effect = longEffect(async () => {
      await held;
      order.push("long row done");
      return null;
    });
    const quick: EffectDefinition = { name: "quick_test", idempotentByShape: true, perform: async () => null };
    const { deps } = deliveryDeps(NOW, { effects: effectRegistry([effect, quick]), settings: { leaseMs: LEASE_MS } });
    const long = await pending();
    const short = await insertRow(env.DB, { status: "pending", effect: "quick_test", payload: {}, nextAttemptAt: NOW - 1 });
    await deliverBatch(deps, [long, short], (id) => {
      order.push(`settled ${id === long ? "long" : "short"}`);
      if (id === short) release();
    });
    expect(order).toEqual(["settled short", "long row done", "settled long"]);
  });

  it("is ended at its longest time even while it renews", async () => {
    const { deps } = depsWith(
      longEffect(async (ctx) => {
        for (;;) {
          if (ctx.signal.aborted) throw ctx.signal.reason;
          expect(await leaseOf(ctx)?.renew()).toBeDefined();
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      }, 60),
    );
    const id = await pending();
    await deliverBatch(deps, [id]);
    const row = await readRow(env.DB, id);
    expect(row.status).toBe("pending");
    expect(row.last_error).toMatch(/longest time, 60 ms/);
  });

  it("an effect that is not long gets no lease", async () => {
    let lease: unknown = "unset";
    const effect: EffectDefinition = {
      name: "long_test",
      idempotentByShape: false,
      async perform(_payload, ctx) {
        lease = leaseOf(ctx);
        return null;
      },
    };
    const { deps } = depsWith(effect);
    const id = await pending();
    await deliverBatch(deps, [id]);
    expect(lease).toBeUndefined();
  });
});

describe("an invocation's bounds on long effects", () => {
  it(`runs at most ${LONG_AT_ONCE} at once: one more is given back (its attempt unspent), and a quick row is not held behind them`, async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const order: string[] = [];
    const effect = longEffect(async () => {
      await held;
      return null;
    });
    const quick: EffectDefinition = { name: "quick_test", idempotentByShape: true, perform: async () => null };
    const { deps } = deliveryDeps(NOW, {
      effects: effectRegistry([effect, quick]),
      settings: { leaseMs: LEASE_MS },
      long: new LongBounds(NOW + 14 * 60_000),
    });
    const longs: number[] = [];
    for (let i = 0; i <= LONG_AT_ONCE; i++) longs.push(await pending());
    const short = await insertRow(env.DB, { status: "pending", effect: "quick_test", payload: {}, nextAttemptAt: NOW - 1 });
    const actions = await deliverBatch(deps, [...longs, short], (id, action) => {
      order.push(id === short ? "quick" : `long:${action.action}`);
      if (id === short) release();
    });
    expect(order).toEqual(["long:resend", "quick", ...Array.from({ length: LONG_AT_ONCE }, () => "long:ack")]);
    const extra = longs.at(-1) as number;
    const given = await readRow(env.DB, extra);
    expect([given.status, given.attempts, given.next_attempt_at]).toEqual(["pending", 0, NOW + 5_000]);
    expect(actions.get(extra)).toEqual({ action: "resend", delaySeconds: 5 });
  });

  it("never outruns its invocation: less than a minute left gives the row back; more caps the attempt at what is left", async () => {
    const effect = longEffect(async () => null);
    const late = deliveryDeps(NOW, {
      effects: effectRegistry([effect]),
      settings: { leaseMs: LEASE_MS },
      long: new LongBounds(NOW + LONG_MIN_MS - 1),
    });
    const first = await pending();
    expect((await deliverBatch(late.deps, [first])).get(first)?.action).toBe("resend");
    expect((await readRow(env.DB, first)).attempts).toBe(0);
    // A minute of the invocation left: the attempt may take that minute, not its own ten.
    const bounds = new LongBounds(NOW + LONG_MIN_MS);
    expect(bounds.take(NOW, 600_000)).toBe(LONG_MIN_MS);
  });
});

describe("a renewal after the attempt", () => {
  it("is refused once the row is finished: a done row's claim is over, whatever its token", async () => {
    let kept: ClaimLease | undefined;
    const { deps } = depsWith(
      longEffect(async (ctx) => {
        kept = leaseOf(ctx);
        return null;
      }),
    );
    const id = await pending();
    await deliverBatch(deps, [id]);
    expect((await readRow(env.DB, id)).status).toBe("done");
    expect(await kept?.renew()).toBeUndefined();
  });
});

describe("not_yet", () => {
  it("gives the attempt back and makes the row due after the wait, not as a wait for an installation", async () => {
    const { deps, log } = depsWith(
      longEffect(async () => {
        throw notYet(2_000, "an earlier answer in this thread is still being written");
      }),
    );
    const id = await pending();
    const actions = await deliverBatch(deps, [id]);
    expect(actions.get(id)).toEqual({ action: "resend", delaySeconds: 2 });
    const row = await readRow(env.DB, id);
    expect(row.status).toBe("pending");
    expect(row.attempts).toBe(0);
    expect(row.next_attempt_at).toBe(NOW + 2_000);
    expect(row.last_error).toBe("an earlier answer in this thread is still being written");
    const waiting = await env.DB.prepare("SELECT waiting_since FROM outbox WHERE id = ?")
      .bind(id)
      .first<{ waiting_since: number | null }>();
    expect(waiting?.waiting_since).toBeNull();
    expect(log.records.find((l) => l.msg === "not attempted; the row waits")?.level).toBe("info");
  });
});
