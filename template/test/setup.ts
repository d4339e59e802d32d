// Each test file starts on a local D1 with the engine's migrations applied (vitest.config.ts reads them).
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
