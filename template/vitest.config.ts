// The app's tests run inside workerd against real local D1 (the engine's migrations, shipped in its package).
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig(async () => ({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: { bindings: { TEST_MIGRATIONS: await readD1Migrations("node_modules/ackbox/migrations") } },
    }),
  ],
  test: { include: ["app/**/*.test.ts"], setupFiles: ["test/setup.ts"] },
}));
