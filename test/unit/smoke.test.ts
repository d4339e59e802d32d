import { env } from "cloudflare:workers";
import { expect, it } from "vitest";

it("has a migrated database", async () => {
  const { results } = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all<{ name: string }>();
  expect(results.map((r) => r.name)).toContain("outbox");
});
