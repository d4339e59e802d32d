// The bindings your tests read from `env` (cloudflare:workers): the wrangler file's, and the migrations
// vitest.config.ts passes in. Add your app's own settings here as you declare them.
import type { D1Migration } from "cloudflare:test";

declare global {
  namespace Cloudflare {
    interface Env {
      DB: D1Database;
      TEST_MIGRATIONS: D1Migration[];
      [setting: string]: unknown;
    }
  }
}
