/**
 * The start banner of `npm start`: where to point Slack, where effects go,
 * and every setting in effect with its source. Secrets show as "(set,
 * hidden)", never their values.
 */
import { join, relative, resolve } from "node:path";
import type { Pipeline } from "./pipeline.ts";
import { PLAIN, type Style } from "./pretty.ts";
import { ADMIN_TOKEN_FILE, DEFAULT_PORT, DEFAULT_RUN_DIR, MODEL_KEY_FILE, PROJECT_ROOT } from "./run-info.ts";
import { displayValue } from "./settings.ts";

export function banner(run: Pipeline, options: { cronIntervalMs: number; style?: Style; cwd?: string }): string[] {
  const style = options.style ?? PLAIN;
  const cwd = options.cwd ?? process.cwd();
  // Inside the project, relative (short); outside it, absolute (a ../../tmp path helps nobody).
  const rel = (path: string) => {
    const short = relative(cwd, path) || ".";
    return short.startsWith("..") ? resolve(path) : short;
  };
  const { values, sources } = run.settings;
  const lines: string[] = [];
  const item = (label: string, text: string) => lines.push(`  ${style.dim(label.padEnd(18))} ${text}`);

  lines.push(style.bold(`ackbox · local run ready in ${(run.startupMs / 1000).toFixed(1)} s`));
  item("Slack Request URL", `${style.cyan(`${run.url}/slack/events`)}  (events, slash commands and interactivity)`);
  item("health", `${run.url}/healthz`);
  if (values.SLACK_CLIENT_ID)
    item(
      "install (OAuth)",
      `${run.url}/slack/install  (a distributed app: each workspace installs and gets its own token; npx ackbox installations list)`,
    );
  item(
    "Slack Web API",
    run.standin
      ? `local stand-in ${run.standin.apiUrl} (prints what it receives; JSON at ${run.standin.url}/_standin/calls)`
      : `${values.SLACK_API_URL ?? "https://slack.com/api/"}${sources.SLACK_API_URL ? ` (${sources.SLACK_API_URL})` : ""}`,
  );
  const model = assistantModel(run, rel);
  if (model !== undefined) item("assistant model", model);
  item(
    "sweeper cron",
    options.cronIntervalMs > 0
      ? `fired every ${options.cronIntervalMs / 1000} s (SWEEP_EVERY_SECONDS)`
      : "not fired on a timer (SWEEP_EVERY_SECONDS=0)",
  );
  item(
    "local D1",
    `${rel(run.persistTo)} · ${
      run.configs.shards.length > 1
        ? `${run.configs.shards.length} shards (${run.configs.shards.map((s) => `${s.binding} ${s.databaseName}`).join(", ")})`
        : run.configs.databaseName
    } · ${run.migrationsApplied.length > 0 ? `applied ${run.migrationsApplied.join(", ")}` : "migrations up to date"}`,
  );
  const tokenFile = run.settings.sources.ADMIN_TOKEN === "local default" ? join(run.dir, ADMIN_TOKEN_FILE) : undefined;
  item(
    "operator API",
    `${run.url}/admin (dashboard) · npx ackbox ${
      tokenFile
        ? `reads the token from ${rel(tokenFile)} by itself (the dashboard: paste it from there)`
        : `needs ACKBOX_ADMIN_TOKEN=<your ADMIN_TOKEN> (${sources.ADMIN_TOKEN})`
    }`,
  );
  item("run folder", `${rel(run.dir)} (generated configs, merged .dev.vars, the local ${localSecrets(sources)}, wrangler.log)`);
  lines.push(`  ${style.dim("settings in effect")} ${style.dim("(the rest: wrangler.toml [vars] and shared/settings.ts defaults)")}`);
  const width = Math.max(...Object.keys(values).map((name) => name.length));
  for (const name of Object.keys(values).sort()) {
    lines.push(
      `    ${name.padEnd(width)}  ${displayValue(name, values[name] ?? "", { secrets: run.settings.appSecrets, declared: run.settings.appDeclared })}  ${style.dim(`← ${sources[name] ?? "?"}`)}`,
    );
  }
  if (run.settings.appDeclared.has("WATCHED_CHANNELS") && !values.WATCHED_CHANNELS)
    lines.push(`    ${"WATCHED_CHANNELS".padEnd(width)}  ${style.dim("unset: the reference app reacts in every channel")}`);
  for (const warning of run.settings.warnings) lines.push(style.yellow(`  ! ${warning}`));
  // Every local command honours PORT and ACKBOX_LOCAL_DIR: the line to copy names the ones this run needs.
  const hints = [
    ...(run.port === DEFAULT_PORT ? [] : [`PORT=${run.port}`]),
    ...(resolve(run.dir) === resolve(PROJECT_ROOT, DEFAULT_RUN_DIR) ? [] : [`ACKBOX_LOCAL_DIR=${rel(run.dir)}`]),
  ];
  const demo = [...hints, "npm run demo"].join(" ");
  lines.push(`  ${style.dim("next")}               ${demo}   (in another terminal) · Ctrl-C stops everything`);
  return lines;
}

/** The secrets generated into the run folder, as the banner names them: "ADMIN_TOKEN", "ADMIN_TOKEN and TOKEN_ENCRYPTION_KEY", … */
function localSecrets(sources: Pipeline["settings"]["sources"]): string {
  const names = ["ADMIN_TOKEN", "TOKEN_ENCRYPTION_KEY", "MODEL_API_KEY"].filter((name, i) => i === 0 || sources[name] === "local default");
  return names.length === 1 ? names.join("") : `${names.slice(0, -1).join(", ")} and ${names.at(-1)}`;
}

/**
 * Where the app's assistant asks its model (the app declares MODEL_URL: app.assistant), never with its key:
 * the stand-in's fake model, a MODEL_URL of your own, or none (the assistant then answers nothing).
 */
function assistantModel(run: Pipeline, rel: (path: string) => string): string | undefined {
  const { values, sources, appDeclared } = run.settings;
  if (!appDeclared.has("MODEL_URL")) return undefined;
  const url = values.MODEL_URL ?? "";
  if (url === "") return "none: MODEL_URL is unset, so the assistant answers nothing (set MODEL_URL, MODEL_API_KEY, MODEL_NAME)";
  const name = values.MODEL_NAME ? `MODEL_NAME ${values.MODEL_NAME}` : "no MODEL_NAME";
  if (sources.MODEL_URL === "stand-in") {
    const key = sources.MODEL_API_KEY === "local default" ? `its key in ${rel(join(run.dir, MODEL_KEY_FILE))}` : "any key";
    return `the stand-in's fake model ${url} (${name}, ${key}; yours: set MODEL_URL)`;
  }
  const key = (values.MODEL_API_KEY ?? "") === "" ? "no MODEL_API_KEY" : "MODEL_API_KEY (set, hidden)";
  return `${url} (${sources.MODEL_URL}) · ${name} · ${key}`;
}
