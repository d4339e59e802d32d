// Applied before every test file, to every shard; storage is isolated per file.
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { shardsOf } from "../../shared/shards/bindings.ts";
import { TEST_SHARD_BINDINGS } from "./settings.ts";

for (const shard of shardsOf(env, Object.keys(TEST_SHARD_BINDINGS).length)) await applyD1Migrations(shard.db, env.TEST_MIGRATIONS);
