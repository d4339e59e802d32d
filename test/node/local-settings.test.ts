/**
 * The local run's settings and output, without starting anything: where each
 * setting comes from, that bad values stop `npm start` before wrangler does,
 * that the merged .dev.vars round-trips through wrangler's own grammar, and
 * that the summaries read the Workers' real log lines.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { banner } from "../../cli/local/banner.ts";
import { dotenvLine, formatDotenv, parseDotenv } from "../../cli/local/dotenv.ts";
import { formatRecord, parseOutputLine } from "../../cli/local/pretty.ts";
import { devWranglerEnv, quietWranglerEnv } from "../../cli/local/processes.ts";
import {
  ADMIN_TOKEN_FILE,
  ensureLocalAdminToken,
  ensureLocalModelKey,
  ensureLocalTokenKey,
  localAdminTokenFor,
  localModelKeyFor,
  localPort,
  localRunDir,
  localUrl,
  MODEL_KEY_FILE,
  PROJECT_ROOT,
  TOKEN_KEY_FILE,
} from "../../cli/local/run-info.ts";
import {
  displayValue,
  LOCAL_BOT_TOKEN,
  LOCAL_CLIENT_SECRET,
  LOCAL_MODEL_NAME,
  LOCAL_RESPONSE_URL_HOSTS,
  LOCAL_SIGNING_SECRET,
  localSigningSecret,
  resolveLocalSettings,
  SettingsError,
  standinModelUrl,
  wantsStandin,
  wantsStandinModel,
} from "../../cli/local/settings.ts";
import { app } from "../../examples/reference/index.ts";
import { setting } from "../../shared/app/index.ts";

const STANDIN = "http://127.0.0.1:40001/api/";

/** A started run as the banner reads it, around these settings. */
function bannerRun(settings: ReturnType<typeof resolveLocalSettings>): Parameters<typeof banner>[0] {
  return {
    settings,
    url: "http://127.0.0.1:8812",
    startupMs: 1000,
    standin: undefined,
    dir: join(tmpdir(), "ackbox-banner"),
    persistTo: join(tmpdir(), "ackbox-banner", "state"),
    port: 8812,
    configs: { shards: [{ binding: "DB", databaseName: "ackbox" }], databaseName: "ackbox" },
    migrationsApplied: [],
  } as unknown as Parameters<typeof banner>[0];
}
/** What the reference app as shipped declares (its settings and the /ask example's: examples/reference/index.ts). */
const appSettings = app.declaredSettings;

describe("a distributed local run (SLACK_CLIENT_ID set)", () => {
  const KEY = "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b";
  const distributed = (env: Record<string, string>, devVars: Record<string, string> = {}) =>
    resolveLocalSettings({
      devVars,
      env,
      standinApiUrl: STANDIN,
      localAdminToken: () => "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
      localTokenKey: () => KEY,
      ingressUrl: "http://127.0.0.1:8811",
    });

  it("against the stand-in, fills the client secret, the redirect URL and the generated key, each marked a local default", () => {
    const s = distributed({ SLACK_CLIENT_ID: "ackbox-local-client" });
    expect(s.values).toMatchObject({
      SLACK_CLIENT_ID: "ackbox-local-client",
      SLACK_CLIENT_SECRET: LOCAL_CLIENT_SECRET,
      SLACK_REDIRECT_URL: "http://127.0.0.1:8811/slack/oauth_redirect",
      TOKEN_ENCRYPTION_KEY: KEY,
    });
    expect(s.sources).toMatchObject({
      SLACK_CLIENT_ID: "environment",
      SLACK_CLIENT_SECRET: "local default",
      SLACK_REDIRECT_URL: "local default",
      TOKEN_ENCRYPTION_KEY: "local default",
    });
    expect(displayValue("TOKEN_ENCRYPTION_KEY", KEY)).toBe("(set, hidden)");
  });

  it("keeps what is set; with SLACK_CLIENT_ID unset, it guesses no OAuth setting but still generates the key", () => {
    const own = distributed({
      SLACK_CLIENT_ID: "1.2",
      TOKEN_ENCRYPTION_KEY: "ef".repeat(32),
      SLACK_REDIRECT_URL: "https://t.test/slack/oauth_redirect",
    });
    expect(own.values.TOKEN_ENCRYPTION_KEY).toBe("ef".repeat(32));
    expect(own.values.SLACK_REDIRECT_URL).toBe("https://t.test/slack/oauth_redirect");
    // Single-workspace: no OAuth defaults, but the key all the same (a custom step's workflow token is sealed with it).
    const single = resolveLocalSettings({
      devVars: {},
      env: {},
      standinApiUrl: STANDIN,
      localTokenKey: () => KEY,
      ingressUrl: "http://127.0.0.1:8811",
    });
    for (const name of ["SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "SLACK_REDIRECT_URL"]) expect(single.values[name]).toBeUndefined();
    expect(single.values.TOKEN_ENCRYPTION_KEY).toBe(KEY);
    expect(single.sources.TOKEN_ENCRYPTION_KEY).toBe("local default");
  });

  it("against a real Slack guesses no secret or redirect URL: the run refuses, naming them", () => {
    expect(() => distributed({ SLACK_CLIENT_ID: "1.2", SLACK_API_URL: "https://slack.com/api/", SLACK_SIGNING_SECRET: "s" })).toThrow(
      /SLACK_CLIENT_SECRET is required when SLACK_CLIENT_ID is set[\s\S]*SLACK_REDIRECT_URL is required/,
    );
  });

  it("generates the key once into the run folder, owner-only, and keeps it across runs", () => {
    const dir = mkdtempSync(join(tmpdir(), "ackbox-key-"));
    try {
      const key = ensureLocalTokenKey(dir);
      expect(key).toMatch(/^[0-9a-f]{64}$/);
      expect(ensureLocalTokenKey(dir)).toBe(key);
      expect(statSync(join(dir, TOKEN_KEY_FILE)).mode & 0o777).toBe(0o600);
      expect(readFileSync(join(dir, TOKEN_KEY_FILE), "utf8").trim()).toBe(key);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the assistant's model in a local run", () => {
  const KEY = "5f0c3a1e9b7d2468ace0f13579bdf2468ace0f13579bdf2468ace0f13579bdf2";
  const local = (devVars: Record<string, string>, env: Record<string, string>, declared = appSettings) =>
    resolveLocalSettings({ devVars, env, standinApiUrl: STANDIN, localModelKey: () => KEY, appSettings: declared });

  it("with an assistant and no MODEL_URL asks the stand-in's fake model, with the run's generated key and a model name", () => {
    expect(wantsStandinModel({}, {}, appSettings)).toBe(true);
    const s = local({}, {});
    expect(s.values).toMatchObject({ MODEL_URL: standinModelUrl(STANDIN), MODEL_API_KEY: KEY, MODEL_NAME: LOCAL_MODEL_NAME });
    expect(standinModelUrl(STANDIN)).toBe("http://127.0.0.1:40001/model/v1");
    expect(s.sources).toMatchObject({ MODEL_URL: "stand-in", MODEL_API_KEY: "local default", MODEL_NAME: "local default" });
    expect(s.warnings).toEqual([]);
    // The banner says where the model is and where its key lives, never the key.
    const text = banner(bannerRun(s), { cronIntervalMs: 0 }).join("\n");
    expect(text).toContain(
      `assistant model    the stand-in's fake model http://127.0.0.1:40001/model/v1 (MODEL_NAME ${LOCAL_MODEL_NAME}, its key in ${join(tmpdir(), "ackbox-banner", MODEL_KEY_FILE)}; yours: set MODEL_URL)`,
    );
    expect(text).toMatch(/MODEL_API_KEY +\(set, hidden\) +← local default/);
    expect(text).toContain("the local ADMIN_TOKEN and MODEL_API_KEY, wrangler.log");
    expect(text).not.toContain(KEY);
  });

  it("leaves a MODEL_URL of your own alone, key and name with it, from .dev.vars or the environment", () => {
    const mine = { MODEL_URL: "https://api.openai.com/v1", MODEL_API_KEY: "sk-mine-0123456789", MODEL_NAME: "gpt-4o-mini" };
    for (const [devVars, env, source] of [
      [mine, {}, ".dev.vars"],
      [{}, mine, "environment"],
    ] as const) {
      expect(wantsStandinModel(devVars, env, appSettings)).toBe(false);
      const s = local(devVars, env);
      expect(s.values).toMatchObject(mine);
      expect(s.sources).toMatchObject({ MODEL_URL: source, MODEL_API_KEY: source, MODEL_NAME: source });
      const text = banner(bannerRun(s), { cronIntervalMs: 0 }).join("\n");
      expect(text).toContain(
        `assistant model    https://api.openai.com/v1 (${source}) · MODEL_NAME gpt-4o-mini · MODEL_API_KEY (set, hidden)`,
      );
      expect(text).not.toContain("sk-mine-0123456789");
    }
    // The environment's MODEL_URL over the file's: the file's key is still yours (and still hidden).
    expect(local({ MODEL_URL: "https://a.test/v1" }, { MODEL_URL: "https://b.test/v1" }).values.MODEL_URL).toBe("https://b.test/v1");
  });

  it("a key or a name set without MODEL_URL: the stand-in's model all the same, with its own, and a warning that says so", () => {
    const s = local({ MODEL_API_KEY: "sk-forgot-the-url-0123" }, { MODEL_NAME: "gpt-4o" });
    expect(s.values).toMatchObject({ MODEL_URL: standinModelUrl(STANDIN), MODEL_API_KEY: KEY, MODEL_NAME: LOCAL_MODEL_NAME });
    expect(s.warnings).toEqual([
      "MODEL_API_KEY and MODEL_NAME are set but MODEL_URL is not: the assistant asks the stand-in's fake model, with the run's own key and name; set MODEL_URL to ask yours",
    ]);
    // Without a generated key (a stand-in that takes any), a key of yours is not sent to it either.
    const keyless = resolveLocalSettings({
      devVars: { MODEL_API_KEY: "sk-forgot-the-url-0123" },
      env: {},
      standinApiUrl: STANDIN,
      appSettings,
    });
    expect(keyless.values.MODEL_API_KEY).toBeUndefined();
  });

  it("sets no model for an app without an assistant, nor when effects go to a Slack of your own", () => {
    const noAssistant = { WATCHED_CHANNELS: setting.list({ description: "channels" }) };
    expect(wantsStandinModel({}, {}, noAssistant)).toBe(false);
    const plain = local({}, {}, noAssistant);
    for (const name of ["MODEL_URL", "MODEL_API_KEY", "MODEL_NAME"]) expect(plain.values[name]).toBeUndefined();
    expect(banner(bannerRun(plain), { cronIntervalMs: 0 }).join("\n")).not.toContain("assistant model");
    const env = { SLACK_API_URL: "http://127.0.0.1:9000/api/" };
    expect(wantsStandinModel({}, env, appSettings)).toBe(false);
    const ownSlack = resolveLocalSettings({ devVars: {}, env, localModelKey: () => KEY, appSettings });
    expect(ownSlack.values.MODEL_URL).toBeUndefined();
    expect(banner(bannerRun(ownSlack), { cronIntervalMs: 0 }).join("\n")).toContain(
      "assistant model    none: MODEL_URL is unset, so the assistant answers nothing (set MODEL_URL, MODEL_API_KEY, MODEL_NAME)",
    );
  });

  it("decides before the stand-in starts exactly what the settings decide after", () => {
    const cases: [Record<string, string>, Record<string, string>][] = [
      [{}, {}],
      [{ MODEL_URL: "https://m.test/v1" }, {}],
      [{ MODEL_URL: "https://m.test/v1" }, { MODEL_URL: "" }],
      [{}, { MODEL_URL: " " }],
      [{ SLACK_BOT_TOKEN: "xoxb-real", SLACK_SIGNING_SECRET: "s" }, {}],
      [{ SLACK_API_URL: "http://127.0.0.1:9/api/" }, { SLACK_API_URL: "" }],
    ];
    for (const [devVars, env] of cases) {
      const s = resolveLocalSettings({
        devVars,
        env,
        ...(wantsStandin(devVars, env) ? { standinApiUrl: STANDIN } : {}),
        localModelKey: () => KEY,
        appSettings,
      });
      expect(wantsStandinModel(devVars, env, appSettings), JSON.stringify([devVars, env])).toBe(s.sources.MODEL_URL === "stand-in");
    }
  });

  it("generates the key once into the run folder, owner-only, and hands it only to the live run's own address", () => {
    const dir = mkdtempSync(join(tmpdir(), "ackbox-model-key-"));
    try {
      const key = ensureLocalModelKey(dir);
      expect(key).toMatch(/^[0-9a-f]{64}$/);
      expect(ensureLocalModelKey(dir)).toBe(key);
      expect(statSync(join(dir, MODEL_KEY_FILE)).mode & 0o777).toBe(0o600);
      const publish = (info: Record<string, unknown>) =>
        writeFileSync(join(dir, "run.json"), JSON.stringify({ pgid: 1, standinUrl: null, persistTo: dir, startedAt: "", ...info }));
      publish({ pid: process.pid, url: "http://127.0.0.1:18850", modelKeyFile: join(dir, MODEL_KEY_FILE) });
      expect(localModelKeyFor("http://localhost:18850", dir)).toBe(key);
      expect(localModelKeyFor("http://127.0.0.1:18851", dir)).toBeUndefined();
      publish({ pid: process.pid, url: "http://127.0.0.1:18850", modelKeyFile: null }); // a MODEL_URL of your own
      expect(localModelKeyFor("http://127.0.0.1:18850", dir)).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("resolveLocalSettings", () => {
  it("fills local defaults and sends effects to the stand-in when no Slack is configured", () => {
    expect(wantsStandin({}, {})).toBe(true);
    const s = resolveLocalSettings({ devVars: {}, env: {}, standinApiUrl: STANDIN, appSettings });
    expect(s.useStandin).toBe(true);
    expect(s.values).toEqual({
      SLACK_API_URL: STANDIN,
      SLACK_BOT_TOKEN: LOCAL_BOT_TOKEN,
      SLACK_SIGNING_SECRET: LOCAL_SIGNING_SECRET,
      RESPONSE_URL_HOSTS: LOCAL_RESPONSE_URL_HOSTS,
      EXAMPLE_ANSWER_URL: STANDIN.replace(/\/api\/$/, "/example/answer"), // the stand-in fakes the example's service too
      MODEL_URL: STANDIN.replace(/\/api\/$/, "/model/v1"), // and the assistant's model (no key asked for here: it takes any)
      MODEL_NAME: LOCAL_MODEL_NAME,
    });
    expect(s.sources).toMatchObject({ SLACK_API_URL: "stand-in", SLACK_SIGNING_SECRET: "local default", EXAMPLE_ANSWER_URL: "stand-in" });
    // An app that does not run the example has no EXAMPLE_ANSWER_URL to point at the stand-in.
    expect(resolveLocalSettings({ devVars: {}, env: {}, standinApiUrl: STANDIN }).values.EXAMPLE_ANSWER_URL).toBeUndefined();
  });

  it("takes the app's declared settings from the environment too, and refuses to start without a required one", () => {
    const declared = {
      STANDUP_URL: setting.url({ description: "The standup service", required: true }),
      STANDUP_TOKEN: setting.secret({ description: "Its key", required: true }),
    };
    const env = { STANDUP_URL: "https://standup.test/api", STANDUP_TOKEN: "standup-token-0123", UNDECLARED: "x" };
    const s = resolveLocalSettings({ devVars: {}, env, standinApiUrl: STANDIN, appSettings: declared });
    expect(s.values).toMatchObject({ STANDUP_URL: "https://standup.test/api", STANDUP_TOKEN: "standup-token-0123" });
    expect(s.sources).toMatchObject({ STANDUP_URL: "environment", STANDUP_TOKEN: "environment" });
    expect(s.values.UNDECLARED).toBeUndefined();
    expect(displayValue("STANDUP_TOKEN", "standup-token-0123", { secrets: s.appSecrets, declared: s.appDeclared })).toBe("(set, hidden)"); // its name says nothing; its kind does
    expect(() =>
      resolveLocalSettings({ devVars: {}, env: { STANDUP_TOKEN: "standup-token-0123" }, standinApiUrl: STANDIN, appSettings: declared }),
    ).toThrow("STANDUP_URL is required: The standup service (the app's setting: set it in .dev.vars or the environment)");
    const bad = () =>
      resolveLocalSettings({
        devVars: { STANDUP_URL: "https://s.test", STANDUP_TOKEN: "short" },
        env: {},
        standinApiUrl: STANDIN,
        appSettings: declared,
      });
    expect(bad).toThrow(SettingsError);
    expect(bad).toThrow("STANDUP_TOKEN must be at least 8 characters");
    expect(bad).not.toThrow(/short/);
  });

  it("takes the root .dev.vars, then the environment over it, for every setting name", () => {
    const devVars = { SLACK_API_URL: "http://127.0.0.1:9000/api/", WATCHED_CHANNELS: "C1", MY_APP_FLAG: "on", LEASE_SECONDS: "60" };
    const env = { WATCHED_CHANNELS: "C2,C3", SLACK_SIGNING_SECRET: "from-env", PATH: "/usr/bin", LEASE_SECONDS: undefined };
    expect(wantsStandin(devVars, env)).toBe(false);
    const s = resolveLocalSettings({ devVars, env, appSettings });
    expect(s.values.WATCHED_CHANNELS).toBe("C2,C3");
    expect(s.sources.WATCHED_CHANNELS).toBe("environment");
    expect(s.values.SLACK_API_URL).toBe("http://127.0.0.1:9000/api/");
    expect(s.sources.SLACK_API_URL).toBe(".dev.vars");
    expect(s.values.MY_APP_FLAG).toBe("on"); // an app's own variable passes through
    expect(s.values.LEASE_SECONDS).toBe("60");
    expect(s.values.PATH).toBeUndefined(); // only setting names are taken from the environment
    expect(s.values.SLACK_BOT_TOKEN).toBe(LOCAL_BOT_TOKEN); // the consumer refuses to run without one
    expect(s.useStandin).toBe(false);
    expect(localSigningSecret(devVars, env)).toBe("from-env");
    expect(localSigningSecret({ SLACK_SIGNING_SECRET: "from-file" }, {})).toBe("from-file");
  });

  it("refuses the public local secret when effects go to the real Slack", () => {
    expect(() => resolveLocalSettings({ devVars: {}, env: { SLACK_BOT_TOKEN: "xoxb-real" } })).toThrow(/set SLACK_SIGNING_SECRET/);
    const s = resolveLocalSettings({ devVars: {}, env: { SLACK_BOT_TOKEN: "xoxb-real", SLACK_SIGNING_SECRET: "real" } });
    expect(s.values.SLACK_API_URL).toBeUndefined(); // the code's default: https://slack.com/api/
  });

  it("stops on the Workers' own validation errors, all at once", () => {
    const run = () =>
      resolveLocalSettings({
        devVars: { LEASE_SECONDS: "ten" },
        env: { MAX_ATTEMPTS: "0", SLACK_API_URL: "ftp://x" },
        standinApiUrl: STANDIN,
      });
    expect(run).toThrow(SettingsError);
    try {
      run();
    } catch (error) {
      const problems = (error as SettingsError).problems.join("\n");
      expect(problems).toMatch(/LEASE_SECONDS must be a whole number/);
      expect(problems).toMatch(/MAX_ATTEMPTS must be a whole number/);
      expect(problems).toMatch(/SLACK_API_URL must be an http\(s\) URL/);
    }
  });

  it("warns when a response_url on the stand-in would be refused", () => {
    const s = resolveLocalSettings({ devVars: { RESPONSE_URL_HOSTS: "hooks.slack.com" }, env: {}, standinApiUrl: STANDIN });
    expect(s.warnings.join()).toMatch(/RESPONSE_URL_HOSTS has no 127\.0\.0\.1/);
  });

  it("turns the operator API on with the run's generated token, unless an ADMIN_TOKEN is set", () => {
    const generated = "3f9c1a7e5b2d8046c1e9f3a75d0b2c8e6a4f1d9b7c3e5a0f28d6b4e1c7a9f305";
    const local = resolveLocalSettings({ devVars: {}, env: {}, standinApiUrl: STANDIN, localAdminToken: () => generated });
    expect(local.values.ADMIN_TOKEN).toBe(generated);
    expect(local.sources.ADMIN_TOKEN).toBe("local default");
    let asked = false;
    const own = resolveLocalSettings({
      devVars: { ADMIN_TOKEN: "my-own-operator-token-4f9a1c7e2b8d6053" },
      env: {},
      standinApiUrl: STANDIN,
      localAdminToken: () => {
        asked = true;
        return generated;
      },
    });
    expect([own.values.ADMIN_TOKEN, own.sources.ADMIN_TOKEN, asked]).toEqual([
      "my-own-operator-token-4f9a1c7e2b8d6053",
      ".dev.vars",
      false,
    ]);
  });

  it("the start banner shows an app's secret as hidden, whatever its name", () => {
    const declared = { STANDUP_CREDENTIALS: setting.secret({ description: "The standup service's credentials" }) };
    const settings = resolveLocalSettings({
      devVars: { STANDUP_CREDENTIALS: "standup-credential-value" },
      env: {},
      standinApiUrl: STANDIN,
      appSettings: declared,
    });
    const text = banner(bannerRun(settings), { cronIntervalMs: 0 }).join("\n");
    expect(text).toMatch(/STANDUP_CREDENTIALS +\(set, hidden\)/);
    expect(text).not.toContain("standup-credential-value");
  });

  it("never displays a secret's value", () => {
    expect(displayValue("SLACK_SIGNING_SECRET", "s3cret")).toBe("(set, hidden)");
    expect(displayValue("ADMIN_TOKEN", "t0ken")).toBe("(set, hidden)");
    expect(displayValue("MY_API_KEY", "k")).toBe("(set, hidden)");
    expect(displayValue("SLACK_API_URL", "https://slack.com/api/")).toBe("https://slack.com/api/");
    expect(displayValue("WATCHED_CHANNELS", "C1", { secrets: new Set(), declared: new Set(["WATCHED_CHANNELS"]) })).toBe("C1");
  });

  it("displays a .dev.vars value only if the engine or the app declares it: any other line is hidden, whatever its name", () => {
    const declared = { STANDUP_URL: setting.url({ description: "The standup service" }) };
    const settings = resolveLocalSettings({
      devVars: { STANDUP_URL: "https://standup.test/api", DATABASE_URL: "postgres://app:pa55word@db.test/app", WATCHED_CHANNEL: "C1" },
      env: {},
      standinApiUrl: STANDIN,
      appSettings: declared,
    });
    const text = banner(bannerRun(settings), { cronIntervalMs: 0 }).join("\n");
    expect(text).toMatch(/STANDUP_URL +https:\/\/standup\.test\/api/);
    expect(text).toMatch(/SLACK_API_URL +http:\/\/127\.0\.0\.1/);
    expect(text).toMatch(/DATABASE_URL +\(set, hidden: neither the engine nor the app declares it\) +← \.dev\.vars/);
    expect(text).toMatch(/WATCHED_CHANNEL +\(set, hidden: neither/); // a typo of WATCHED_CHANNELS: named, not shown
    expect(text).not.toContain("pa55word");
    expect(text).not.toContain("the reference app"); // its WATCHED_CHANNELS line is for an app that declares it
  });
});

describe(".dev.vars files", () => {
  it("reads what wrangler's dotenv parser reads", () => {
    const text = [
      "# a comment",
      "PLAIN=abc # trailing comment",
      "export EXPORTED=1",
      "SINGLE='a # not a comment'",
      'DOUBLE="line1\\nline2"',
      'BACKTICK=`it\'s "quoted"`',
      "EMPTY=",
      "SPACED = padded ",
    ].join("\n");
    expect(parseDotenv(text)).toEqual({
      PLAIN: "abc",
      EXPORTED: "1",
      SINGLE: "a # not a comment",
      DOUBLE: "line1\nline2",
      BACKTICK: `it's "quoted"`,
      EMPTY: "",
      SPACED: "padded",
    });
  });

  it("writes values that read back exactly, whatever they hold", () => {
    const values = {
      A: "plain-value_1.2:3/4@x,y",
      B: "has space # and hash",
      C: "it's",
      D: `both ' and "`,
      E: "multi\nline",
      F: "",
      G: "$NOT_EXPANDED",
    };
    expect(parseDotenv(formatDotenv(values))).toEqual(values);
    expect(() => dotenvLine("H", "'\"`")).toThrow(/cannot hold/);
    expect(() => dotenvLine("bad name", "x")).toThrow(/not a valid variable name/);
  });
});

describe("readable output", () => {
  // Lines as wrangler prints them (captured from a run).
  const accepted =
    '[ackbox-ingress] {"level":"info","msg":"slack request","verdict":"accepted","status":200,"surface":"event","id":"Ev1","outbox_ids":[7],"retry_num":null,"retry_reason":null,"ms":4}';
  const duplicateRetry =
    '[ackbox-ingress] {"level":"info","msg":"slack request","verdict":"duplicate","status":200,"surface":"event","id":"Ev1","retry_num":"1","retry_reason":"http_timeout","ms":2}';
  const unauthorized =
    '\u001b[33m▲ \u001b[43;33m[\u001b[43;30mWARNING\u001b[43;33m]\u001b[0m \u001b[1m{"level":"warn","msg":"slack request","verdict":"unauthorized","status":401,"reason":"signature mismatch","retry_num":null,"retry_reason":null,"ms":0}\u001b[0m';
  const delivered =
    '[ackbox-consumer] {"level":"info","msg":"delivered","outbox_id":7,"receipt_id":"Ev1","effect":"chat.postMessage","attempt":1,"ms":17}';
  const retry =
    '[ackbox-consumer] {"level":"info","msg":"will retry","outbox_id":8,"receipt_id":"Ev2","effect":"reactions.add","attempt":1,"reason":"reactions.add: HTTP 503","delay_ms":2300}';
  const dead =
    '[ackbox-consumer] {"level":"warn","msg":"parked as dead","outbox_id":9,"receipt_id":"c","effect":"response_url","attempt":2,"reason":"response_url: HTTP 404"}';
  const idleSweep =
    '[ackbox-consumer] {"level":"debug","msg":"sweep","reenqueued":0,"enqueueFailed":0,"steps":1,"pruned":{"receipts":0,"done":0,"dead":0}}';
  const busySweep =
    '[ackbox-consumer] {"level":"info","msg":"sweep","reenqueued":3,"enqueueFailed":0,"steps":1,"pruned":{"receipts":2,"done":0,"dead":0}}';

  const show = (line: string) => {
    const parsed = parseOutputLine(line);
    if (parsed.kind !== "record") throw new Error(`not a record: ${line}`);
    return formatRecord(parsed.record);
  };

  it("summarises each verdict, delivery, retry, dead row and busy sweep in one line", () => {
    expect(parseOutputLine(accepted)).toMatchObject({ kind: "record", record: { worker: "ackbox-ingress", msg: "slack request" } });
    expect(show(accepted)).toBe("← accepted  event Ev1 → outbox #7 → queue 4 ms");
    expect(show(duplicateRetry)).toBe("← duplicate event Ev1: already recorded, nothing new (Slack retry #1: http_timeout) 2 ms");
    expect(show(unauthorized)).toBe("← 401 unauthorized signature mismatch 0 ms");
    expect(show(delivered)).toBe("✓ delivered #7 chat.postMessage (attempt 1, 17 ms)");
    expect(show(retry)).toBe("↻ retry    #8 reactions.add in 2.3 s after attempt 1: reactions.add: HTTP 503");
    expect(show(dead)).toBe("✗ dead     #9 response_url after attempt 2: response_url: HTTP 404");
    expect(show(busySweep)).toBe("⟳ sweep    re-enqueued 3 stale row(s); pruned 2 receipts");
    expect(show(idleSweep)).toBeUndefined();
    const command =
      '[ackbox-ingress] {"level":"info","msg":"slack request","verdict":"accepted","status":200,"surface":"command","id":"command:T0:123.456","outbox_ids":[9],"ms":3}';
    expect(show(command)).toBe("← accepted  command:T0:123.456 → outbox #9 → queue 3 ms");
    // With the first attempt: the ingress performs the row itself, or says why the queue has it.
    const inline =
      '[ackbox-ingress] {"level":"info","msg":"slack request","verdict":"accepted","status":200,"surface":"event","id":"Ev2","outbox_ids":[12],"first_attempt":"inline","ms":2}';
    expect(show(inline)).toBe("← accepted  event Ev2 → outbox #12 → first attempt 2 ms");
    const shed =
      '[ackbox-ingress] {"level":"info","msg":"slack request","verdict":"accepted","status":200,"surface":"event","id":"Ev3","outbox_ids":[13],"first_attempt":"in_flight","ms":9}';
    expect(show(shed)).toBe("← accepted  event Ev3 → outbox #13 → queue (in flight) 9 ms");
    const offOrNone =
      '[ackbox-ingress] {"level":"info","msg":"slack request","verdict":"accepted","status":200,"surface":"event","id":"Ev4","outbox_ids":[14],"first_attempt":"no_inline_effect","ms":2}';
    expect(show(offOrNone)).toBe("← accepted  event Ev4 → outbox #14 → queue 2 ms");
    const chain =
      '[ackbox-consumer] {"level":"info","msg":"delivered","outbox_id":10,"effect":"ask-service","attempt":1,"ms":5,"follow_up_ids":[11]}';
    expect(show(chain)).toBe("✓ delivered #10 ask-service (attempt 1, 5 ms) → follow-ups #11 → queue");
    const options =
      '[ackbox-ingress] {"level":"info","msg":"slack request","verdict":"answered","status":200,"surface":"interaction","id":"interaction:T0:block_suggestion:U1:topic:de","handler":"options(topic)","ms":1}';
    expect(show(options)).toBe(
      "← answered  interaction:T0:block_suggestion:U1:topic:de: options(topic) answered inline, nothing written 1 ms",
    );
    const refused =
      '[ackbox-ingress] {"level":"error","msg":"slack request","verdict":"refused","status":500,"surface":"event","id":"Ev2","reason":"handler event(app_mention) threw: Error: x","ms":1}';
    expect(show(refused)).toBe("← 500 refused event Ev2: handler event(app_mention) threw: Error: x 1 ms");
  });

  it("drops wrangler's start-up chatter and keeps what matters", () => {
    expect(parseOutputLine("[wrangler:info] POST /slack/events 200 OK (12ms)")).toMatchObject({ kind: "wrangler", noise: true });
    expect(parseOutputLine("[wrangler:info] QUEUE ackbox-outbox 2/2 (27ms)")).toMatchObject({ noise: true });
    expect(parseOutputLine('env.SLACK_API_URL ("(hidden)")   Environment Variable   local')).toMatchObject({ noise: true });
    expect(parseOutputLine("✘ [ERROR] The Workers runtime failed to start.")).toMatchObject({ kind: "wrangler", noise: false });
    expect(parseOutputLine("{not json")).toMatchObject({ kind: "wrangler", noise: false });
  });
});

describe("the local run's token and address, as every local command finds them", () => {
  it("generates the token once (64 hex characters, owner-only) and keeps it across runs", () => {
    const dir = mkdtempSync(join(tmpdir(), "ackbox-token-"));
    try {
      const first = ensureLocalAdminToken(dir);
      expect(first).toMatch(/^[0-9a-f]{64}$/);
      expect(statSync(join(dir, ADMIN_TOKEN_FILE)).mode & 0o777).toBe(0o600);
      expect(ensureLocalAdminToken(dir)).toBe(first);
      writeFileSync(join(dir, ADMIN_TOKEN_FILE), "tampered\n"); // not a token this code wrote: replaced
      const second = ensureLocalAdminToken(dir);
      expect(second).toMatch(/^[0-9a-f]{64}$/);
      expect(second).not.toBe(first);
      expect(readFileSync(join(dir, ADMIN_TOKEN_FILE), "utf8")).toBe(`${second}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("hands the token only to the live local run's own address", () => {
    const dir = mkdtempSync(join(tmpdir(), "ackbox-token-"));
    try {
      const token = ensureLocalAdminToken(dir);
      const publish = (info: Record<string, unknown>) =>
        writeFileSync(join(dir, "run.json"), JSON.stringify({ pgid: 1, standinUrl: null, persistTo: dir, startedAt: "", ...info }));
      publish({ pid: process.pid, url: "http://127.0.0.1:18840", adminTokenFile: join(dir, ADMIN_TOKEN_FILE) });
      expect(localAdminTokenFor("http://127.0.0.1:18840", dir)).toBe(token);
      expect(localAdminTokenFor("http://localhost:18840/", dir)).toBe(token);
      expect(localAdminTokenFor("http://127.0.0.1:18841", dir)).toBeUndefined(); // another port: another server
      expect(localAdminTokenFor("https://ackbox.example.workers.dev", dir)).toBeUndefined();
      publish({ pid: process.pid, url: "http://127.0.0.1:18840", adminTokenFile: null }); // an ADMIN_TOKEN of your own
      expect(localAdminTokenFor("http://127.0.0.1:18840", dir)).toBeUndefined();
      publish({ pid: 2 ** 22 + 12_345, url: "http://127.0.0.1:18840", adminTokenFile: join(dir, ADMIN_TOKEN_FILE) }); // no such process
      expect(localAdminTokenFor("http://127.0.0.1:18840", dir)).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("takes PORT and ACKBOX_LOCAL_DIR from the environment, and refuses a PORT that is not one", () => {
    expect(localUrl({})).toBe("http://127.0.0.1:8787");
    expect(localUrl({ PORT: "18999" })).toBe("http://127.0.0.1:18999");
    expect(localPort({ PORT: " " })).toBe(8787);
    for (const bad of ["abc", "0", "65536", "80.5"]) expect(() => localPort({ PORT: bad }), bad).toThrow(/PORT must be a port number/);
    expect(localRunDir({})).toBe(join(PROJECT_ROOT, ".ackbox/local"));
    expect(localRunDir({ ACKBOX_LOCAL_DIR: "/tmp/elsewhere" })).toBe("/tmp/elsewhere");
  });
});

describe("the environment npm start runs wrangler dev with", () => {
  it("turns wrangler's local trace collector and its debug log file off unless the environment asks for them, and stays quiet", () => {
    const paths = { registry: "/tmp/r", logs: "/tmp/l" };
    const plain = devWranglerEnv({ PATH: "/bin" }, paths);
    expect(plain.X_LOCAL_OBSERVABILITY).toBe("false");
    expect(plain.WRANGLER_WRITE_LOGS).toBe("false");
    expect(devWranglerEnv({ WRANGLER_WRITE_LOGS: "true" }, paths).WRANGLER_WRITE_LOGS).toBe("true");
    expect(plain).toMatchObject({
      PATH: "/bin",
      WRANGLER_SEND_METRICS: "false",
      WRANGLER_REGISTRY_PATH: "/tmp/r",
      WRANGLER_LOG_PATH: "/tmp/l",
    });
    expect(devWranglerEnv({ X_LOCAL_OBSERVABILITY: "true" }, paths).X_LOCAL_OBSERVABILITY).toBe("true");
    // One-off wrangler commands (migrations by hand, deploys) are left as wrangler has them.
    expect(quietWranglerEnv({}).X_LOCAL_OBSERVABILITY).toBeUndefined();
  });
});
