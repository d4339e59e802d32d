/**
 * The committed .dev.vars.example documents every setting of shared/settings.ts
 * with its real default: it is generated, and this fails when it drifts
 * (fix: npm run dev-vars:example).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DEV_VARS_EXAMPLE, devVarsExample } from "../../scripts/dev-vars-example.ts";
import { parseDotenv } from "../../scripts/local/dotenv.ts";
import { SETTINGS } from "../../shared/settings.ts";

describe(".dev.vars.example", () => {
  it("is what scripts/dev-vars-example.ts generates from SETTINGS (run npm run dev-vars:example after changing a setting)", () => {
    expect(readFileSync(DEV_VARS_EXAMPLE, "utf8")).toBe(devVarsExample());
  });

  it("names every setting with its default, ready to uncomment", () => {
    const uncommented = readFileSync(DEV_VARS_EXAMPLE, "utf8")
      .split("\n")
      .filter((line) => /^# [A-Z][A-Z0-9_]*=/.test(line))
      .map((line) => line.slice(2))
      .join("\n");
    const values = parseDotenv(uncommented);
    expect(Object.keys(values)).toEqual(SETTINGS.map((s) => s.name));
    for (const spec of SETTINGS) expect(values[spec.name], spec.name).toBe(spec.default);
  });
});
