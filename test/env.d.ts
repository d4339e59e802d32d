import type { D1Migration } from "cloudflare:test";
import type { OutboxMessage } from "../shared/outbox/model.ts";

declare global {
  namespace Cloudflare {
    interface Env {
      DB: D1Database;
      OUTBOX_QUEUE: Queue<OutboxMessage>;
      TEST_MIGRATIONS: D1Migration[];
      [setting: string]: unknown;
    }
  }
}
