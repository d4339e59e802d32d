/**
 * The app module a local command runs (cli/local/project-app.ts): app/index.ts, or the one ACKBOX_APP names;
 * a module that exports no `app` is refused naming it; and the Worker entries written over another module are the
 * engine's factories over its `app`, as a project's workers/<role>/index.ts are over app/index.ts.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeAppEntries } from "../../cli/local/app-entries.ts";
import { appModuleOf, loadProjectApp, PROJECT_APP } from "../../cli/local/project-app.ts";
import { ENGINE_ROOT, PROJECT_ROOT } from "../../cli/local/run-info.ts";
import { REFERENCE_APP } from "./support/apps.ts";

describe("the app module of a local run", () => {
  it("is app/index.ts unless ACKBOX_APP names another (blank counts as unset)", () => {
    expect(appModuleOf({})).toBe(PROJECT_APP);
    expect(appModuleOf({ ACKBOX_APP: "  " })).toBe(PROJECT_APP);
    expect(appModuleOf({ ACKBOX_APP: ` ${REFERENCE_APP} ` })).toBe(REFERENCE_APP);
  });

  it("loads the named module's app, and refuses one that exports none, naming the file", async () => {
    const reference = await loadProjectApp(PROJECT_ROOT, REFERENCE_APP);
    expect(Object.keys(reference.declaredSettings).sort()).toEqual([
      "EXAMPLE_ANSWER_KEY",
      "EXAMPLE_ANSWER_URL",
      "MODEL_API_KEY",
      "MODEL_NAME",
      "MODEL_URL",
      "WATCHED_CHANNELS",
    ]);
    await expect(loadProjectApp(PROJECT_ROOT, "examples/standup/app.ts")).rejects.toThrow(
      `${join(PROJECT_ROOT, "examples/standup/app.ts")} exports no \`app\``,
    );
  });

  it("gets both Worker entries written over it: the engine's factories over its app, one module each", () => {
    const dir = mkdtempSync(join(tmpdir(), "ackbox-entries-"));
    try {
      const app = join(PROJECT_ROOT, REFERENCE_APP);
      const entries = writeAppEntries(dir, app);
      expect(entries).toEqual({ ingress: join(dir, "ingress/index.ts"), consumer: join(dir, "consumer/index.ts") });
      for (const role of ["ingress", "consumer"] as const) {
        const text = readFileSync(entries[role], "utf8");
        expect(text).toContain(`import { app } from ${JSON.stringify(app)};`);
        expect(text).toContain(`import { ${role} } from ${JSON.stringify(join(ENGINE_ROOT, `workers/${role}/worker.ts`))};`);
        expect(text).toContain(`export default ${role}(app);`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
