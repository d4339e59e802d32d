/**
 * The committed .dev.vars.example documents every setting of shared/settings.ts
 * with its real default: it is generated, and this fails when it drifts
 * (fix: npm run dev-vars:example).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { app } from "../../app/index.ts";
import { parseDotenv } from "../../cli/local/dotenv.ts";
import { DEV_VARS_EXAMPLE, devVarsExample } from "../../cli/project/dev-vars-example.ts";
import { setting } from "../../shared/app/index.ts";
import { SETTINGS } from "../../shared/settings.ts";

describe(".dev.vars.example", () => {
  it("is what cli/project/dev-vars-example.ts generates from SETTINGS (run npm run dev-vars:example after changing a setting)", () => {
    expect(readFileSync(DEV_VARS_EXAMPLE, "utf8")).toBe(devVarsExample());
  });

  it("names every setting with its default, ready to uncomment", () => {
    const uncommented = readFileSync(DEV_VARS_EXAMPLE, "utf8")
      .split("\n")
      .filter((line) => /^# [A-Z][A-Z0-9_]*=/.test(line))
      .map((line) => line.slice(2))
      .join("\n");
    const values = parseDotenv(uncommented);
    expect(Object.keys(values)).toEqual([...SETTINGS.map((s) => s.name), ...Object.keys(app.declaredSettings)]);
    for (const spec of SETTINGS) expect(values[spec.name], spec.name).toBe(spec.default);
  });

  it("lists the app's own settings after the engine's, each with its kind, whether it is required, and its default", () => {
    const text = devVarsExample({
      STANDUP_URL: setting.url({ description: "The standup service.", required: true }),
      STANDUP_TOKEN: setting.secret({ description: "Its key." }),
      STANDUP_SIZE: setting.number({ description: "People per standup.", default: 8 }),
    });
    const own = text.slice(text.indexOf("# ── The app's own settings"));
    expect(own).toContain("# The standup service. [url, required]\n# STANDUP_URL=");
    expect(own).toContain("# Its key. [secret]\n# STANDUP_TOKEN=");
    expect(own).toContain("# People per standup. [number]\n# STANDUP_SIZE=8");
    expect(devVarsExample({})).not.toContain("The app's own settings");
  });
});
