/**
 * The two wrangler files describe one system: they must agree with each other
 * and with the code's settings. `wrangler types` cannot check this (see
 * shared/env.ts), so this test does.
 */

import { describe, expect, it } from "vitest";
import { unstable_readConfig } from "wrangler";
import { app } from "../../examples/reference/index.ts";
import { SETTINGS } from "../../shared/settings.ts";

const ingress = unstable_readConfig({ config: "wrangler.toml" });
const consumer = unstable_readConfig({ config: "workers/consumer/wrangler.toml" });
const defaults = new Map(SETTINGS.map((s) => [s.name, s.default]));
const appDeclared = Object.entries(app.declaredSettings);

describe("wrangler configuration", () => {
  it("binds both Workers to the same database and the same outbox queue", () => {
    for (const config of [ingress, consumer]) {
      expect(config.d1_databases).toHaveLength(1);
      expect(config.d1_databases[0]).toMatchObject({ binding: "DB", database_name: "ackbox" });
      expect(config.queues.producers).toEqual([expect.objectContaining({ binding: "OUTBOX_QUEUE", queue: "ackbox-outbox" })]);
    }
    expect(consumer.d1_databases[0]?.database_id).toBe(ingress.d1_databases[0]?.database_id);
  });

  it("has the consumer consume the outbox queue into the dead-letter queue its settings name, and consume that too", () => {
    const dlq = consumer.vars.DEAD_LETTER_QUEUE ?? defaults.get("DEAD_LETTER_QUEUE");
    expect(consumer.queues.consumers).toEqual([
      expect.objectContaining({ queue: "ackbox-outbox", dead_letter_queue: dlq }),
      expect.objectContaining({ queue: dlq }),
    ]);
    const outbox = consumer.queues.consumers?.[0];
    // The row's own attempt count must park a failing effect before the queue gives up on it.
    expect(outbox?.max_retries ?? 3).toBeGreaterThanOrEqual(Number(defaults.get("MAX_ATTEMPTS")));
    expect(ingress.queues.consumers ?? []).toEqual([]);
  });

  it("runs the sweep from the consumer's cron", () => {
    expect(consumer.triggers.crons).toEqual(["* * * * *"]);
    expect(ingress.triggers.crons ?? []).toEqual([]);
  });

  it("lists only known settings in [vars], each at the code's default", () => {
    const appDefaults = new Map(appDeclared.map(([name, spec]) => [name, spec.default]));
    for (const config of [ingress, consumer]) {
      for (const [name, value] of Object.entries(config.vars)) {
        expect(defaults.has(name) || appDefaults.has(name), `${name} is neither a setting in shared/settings.ts nor the app's`).toBe(true);
        expect(value, `${config.name}: ${name}`).toBe(defaults.get(name) ?? appDefaults.get(name));
      }
    }
  });

  it("gives both Workers every one of the app's own settings that is not a secret: its effects run in both", () => {
    for (const [name, spec] of appDeclared) {
      if (spec.kind === "secret") {
        // A secret in [vars] would be in the repository and the dashboard's plain view.
        for (const config of [ingress, consumer]) expect(config.vars[name], `${config.name}: ${name}`).toBeUndefined();
        continue;
      }
      expect(consumer.vars[name], `consumer: ${name}`).toBe(ingress.vars[name]);
      expect(ingress.vars[name], `ingress: ${name}`).toBeDefined();
    }
  });

  it("uses a compatibility date the local runtime supports, the same for both", () => {
    expect(consumer.compatibility_date).toBe(ingress.compatibility_date);
    expect(ingress.compatibility_date <= "2026-11-09").toBe(true);
  });
});
