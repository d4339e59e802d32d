/**
 * The node project's global setup: one migrated local D1 state, made once per
 * run by a real `wrangler d1 migrations apply` (shard 0 `ackbox` and shard 1
 * `ackbox-shard-1`, the ids a local run gives them), then copied by every test
 * that only needs a migrated state (copyMigratedState in ops-local.mts). A
 * fresh migration stays where it is the claim: `npm start` in
 * local-run.test.ts migrates its own empty state and says what it applied.
 *
 * The migration runs in the background while the first test files run (vitest
 * awaits every global setup before any file starts): it ends by writing
 * `ready.json` (or `failed.txt`) in the folder it provides, which
 * copyMigratedState waits for.
 */
import { cp, mkdtemp, readdir, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { localShardDatabaseId } from "../../cli/local/config.ts";
import { offlineEnv, ROOT, type TemplateReady, wrangler } from "./ops-local.mts";

/** Provides migratedD1Dir (declared in ops-local.mts, which reads it). */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(join(tmpdir(), "ackbox-d1-template-"));
  project.provide("migratedD1Dir", dir);
  // Written aside and renamed into place: a reader never sees half a marker.
  const mark = async (name: string, text: string) => {
    await writeFile(join(dir, `${name}.partial`), text);
    await rename(join(dir, `${name}.partial`), join(dir, name));
  };
  const made = migrate(dir).then(
    (ready) => mark("ready.json", JSON.stringify(ready)),
    (error: Error) => mark("failed.txt", error.stack ?? String(error)),
  );
  return async () => {
    await made;
    await rm(dir, { recursive: true, force: true });
  };
}

async function migrate(dir: string): Promise<TemplateReady> {
  const state = join(dir, "state");
  const config = join(dir, "wrangler.toml");
  const migrations = join(ROOT, "migrations");
  const database = (binding: string, name: string, id: string) =>
    `[[d1_databases]]\nbinding = "${binding}"\ndatabase_name = "${name}"\ndatabase_id = "${id}"\nmigrations_dir = ${JSON.stringify(migrations)}\n`;
  await writeFile(
    config,
    `name = "ackbox-d1-template"\ncompatibility_date = "2026-11-01"\n${database("DB", "ackbox", localShardDatabaseId(0))}${database("DB_1", "ackbox-shard-1", localShardDatabaseId(1))}`,
  );
  const env = offlineEnv({ WRANGLER_REGISTRY_PATH: join(dir, "registry"), XDG_CONFIG_HOME: join(dir, "config") });
  // Each database migrated into its own folder, both at once; then shard 1's file joins shard 0's folder
  // (local D1 keeps one SQLite file per database id, named for it: the folders do not collide).
  const objects = join("v3", "d1", "miniflare-D1DatabaseObject");
  const names = ["ackbox", "ackbox-shard-1"];
  const made = await Promise.all(
    names.map(async (name) => {
      const own = join(dir, name);
      const result = await wrangler(["d1", "migrations", "apply", name, "--local", "--persist-to", own, "-c", config], env, 120_000);
      if (result.code !== 0)
        throw new Error(`migrating the template D1 ${name} failed (${result.code}):\n${result.stdout}\n${result.stderr}`);
      const sqlite = (await readdir(join(own, objects))).filter((f) => /^[0-9a-f]{64}\.sqlite$/.test(f));
      if (sqlite.length !== 1) throw new Error(`migrating ${name} made ${sqlite.length} database files, not one`);
      return { own, file: sqlite[0] as string };
    }),
  );
  await rename(made[0]?.own as string, state);
  for (const { own, file } of made.slice(1)) {
    for (const suffix of ["", "-wal", "-shm"]) {
      await cp(join(own, objects, file + suffix), join(state, objects, file + suffix)).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== "ENOENT") throw error;
      });
    }
  }
  return { state, files: Object.fromEntries(names.map((name, i) => [name, join(objects, made[i]?.file as string)])) };
}
