/**
 * `.dev.vars.example`, generated from shared/settings.ts's SETTINGS and the
 * settings the app declares (app/index.ts, shared/app/settings.ts) so that it
 * documents every setting with its real default.
 *
 *   npm run dev-vars:example            rewrite .dev.vars.example
 *   node cli/project/dev-vars-example.ts --check   exit 1 if it is out of date
 *
 * test/node/dev-vars-example.test.ts runs the check in CI.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { app } from "../../app/index.ts";
import type { SettingsDeclaration } from "../../shared/app/settings.ts";
import { SETTINGS } from "../../shared/settings.ts";
import { dotenvLine } from "../local/dotenv.ts";
import { PROJECT_ROOT } from "../local/run-info.ts";
import { LOCAL_BOT_TOKEN, LOCAL_MODEL_NAME, LOCAL_RESPONSE_URL_HOSTS, LOCAL_SIGNING_SECRET } from "../local/settings.ts";

export const DEV_VARS_EXAMPLE = join(PROJECT_ROOT, ".dev.vars.example");

export function devVarsExample(declared: SettingsDeclaration = app.declaredSettings): string {
  const lines = [
    "# Every setting of both Workers, with its default. Generated from shared/settings.ts",
    "# (SETTINGS) and the app's own (app.settings in app/index.ts) by `npm run dev-vars:example`;",
    "# a test fails when they disagree.",
    "#",
    "# Local runs: copy this file to .dev.vars (git-ignored) and uncomment what you change.",
    "# `npm start` reads .dev.vars, and the process environment overrides any of these names",
    "# (SLACK_API_URL=http://127.0.0.1:9000 npm start). What is still unset gets a local default:",
    `#   SLACK_SIGNING_SECRET  ${LOCAL_SIGNING_SECRET} (public: npm run demo signs with it)`,
    `#   SLACK_BOT_TOKEN       ${LOCAL_BOT_TOKEN} (what the stand-in or your fake Slack receives)`,
    "#   SLACK_API_URL         the local Slack stand-in, when neither SLACK_BOT_TOKEN nor SLACK_API_URL is set",
    `#   RESPONSE_URL_HOSTS    ${LOCAL_RESPONSE_URL_HOSTS}`,
    "#   ADMIN_TOKEN           generated once into the run folder (.ackbox/local/admin-token); npx ackbox reads it there",
    "#   MODEL_URL             with an assistant (app.assistant), the stand-in's fake model when the stand-in is used;",
    `#                         MODEL_NAME ${LOCAL_MODEL_NAME}, MODEL_API_KEY generated once into .ackbox/local/model-api-key`,
    "# With a real SLACK_BOT_TOKEN, set your app's SLACK_SIGNING_SECRET too: npm start refuses the public one.",
    "# The launcher's own options are environment-only: PORT (8787), SWEEP_EVERY_SECONDS (60),",
    "# ACKBOX_LOCAL_DIR (.ackbox/local). npm run demo and npx ackbox honour the same PORT and ACKBOX_LOCAL_DIR.",
    "#",
    "# Deployed: secrets are set by `npm run setup` (or `npx wrangler secret put`), the rest are",
    "# [vars] in wrangler.toml and workers/consumer/wrangler.toml. See docs/running-locally.md.",
  ];
  for (const spec of SETTINGS) {
    lines.push("");
    for (const line of wrap(`${spec.doc}${spec.secret ? " [secret]" : ""}`, 96)) lines.push(`# ${line}`);
    lines.push(`# ${dotenvLine(spec.name, spec.default)}`);
  }
  const own = Object.entries(declared);
  if (own.length > 0) {
    lines.push(
      "",
      "# ── The app's own settings (app.settings in app/index.ts). Deployed: a secret is uploaded by",
      "# npm run setup; the rest go in [vars] of both wrangler files (the effects run in both Workers).",
    );
    for (const [name, spec] of own) {
      lines.push("");
      const tags = [spec.kind, ...(spec.required ? ["required"] : [])].join(", ");
      for (const line of wrap(`${spec.description} [${tags}]`, 96)) lines.push(`# ${line}`);
      lines.push(`# ${dotenvLine(name, spec.default)}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(line);
  return lines;
}

if (import.meta.main) {
  const expected = devVarsExample();
  if (process.argv.includes("--check")) {
    let actual = "";
    try {
      actual = readFileSync(DEV_VARS_EXAMPLE, "utf8");
    } catch {
      // Missing: out of date.
    }
    if (actual !== expected) {
      console.error(".dev.vars.example is out of date with shared/settings.ts or the app's settings: run npm run dev-vars:example");
      process.exit(1);
    }
    console.log(".dev.vars.example is up to date");
  } else {
    writeFileSync(DEV_VARS_EXAMPLE, expected);
    console.log(`wrote ${DEV_VARS_EXAMPLE} (${SETTINGS.length} settings, and ${Object.keys(app.declaredSettings).length} of the app's)`);
  }
}
