/**
 * `npx ackbox new <folder>`: a new project over the engine as a package. It writes the template (template/: an
 * app in one file, its whole-path tests, the two one-line Worker entries, the test config), the engine's two
 * wrangler files with their migrations read from node_modules/ackbox/migrations, and a package.json whose
 * scripts are the engine's commands; then `npm install` in it (unless --no-install).
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { ENGINE_ROOT } from "../local/run-info.ts";

/** The engine's devDependencies a project needs too: the test pool, the runtime's types, Node 22 and the checker. */
const PROJECT_DEV_DEPENDENCIES = [
  "@cloudflare/vitest-plugin",
  "@cloudflare/workers-types",
  "node",
  "typescript",
  "vite",
  "vitest",
  "wrangler",
];

/** Each wrangler file, and its migrations_dir as the project reads it (relative to that file). */
const WRANGLER_FILES = [
  { path: "wrangler.toml", from: 'migrations_dir = "migrations"', to: 'migrations_dir = "node_modules/ackbox/migrations"' },
  {
    path: "workers/consumer/wrangler.toml",
    from: 'migrations_dir = "../../migrations"',
    to: 'migrations_dir = "../../node_modules/ackbox/migrations"',
  },
] as const;

/** npm leaves a `.gitignore` out of a package: the template holds it as `gitignore`. */
const RENAMED = { gitignore: ".gitignore" } as const;

export interface NewProject {
  /** The folder to create (it must not exist, or be empty). */
  readonly dir: string;
  /** What package.json depends on for ackbox: a semver range, or `file:<tarball>` (default ^<this version>). */
  readonly engine?: string;
  readonly engineRoot?: string;
}

/** Writes the project; returns its files, relative to `dir`. Throws, writing nothing, if `dir` holds anything. */
export function newProject(options: NewProject): string[] {
  const engineRoot = options.engineRoot ?? ENGINE_ROOT;
  const dir = resolve(options.dir);
  if (existsSync(dir) && readdirSync(dir).length > 0) throw new Error(`${dir} is not empty`);
  const engine = JSON.parse(readFileSync(join(engineRoot, "package.json"), "utf8")) as {
    version: string;
    engines: Record<string, string>;
    devDependencies: Record<string, string>;
    allowScripts: Record<string, boolean>;
  };
  const wrangler = WRANGLER_FILES.map(({ path, from, to }) => {
    const text = readFileSync(join(engineRoot, path), "utf8");
    if (!text.includes(from)) throw new Error(`${path} of the engine has no ${from} to point at the package's migrations`);
    return { path, text: text.replace(from, to) };
  });
  mkdirSync(dir, { recursive: true });
  cpSync(join(engineRoot, "template"), dir, { recursive: true });
  for (const [from, to] of Object.entries(RENAMED)) if (existsSync(join(dir, from))) renameSync(join(dir, from), join(dir, to));
  for (const { path, text } of wrangler) writeFileSync(join(dir, path), text);
  cpSync(join(engineRoot, ".dev.vars.example"), join(dir, ".dev.vars.example"));
  const name = basename(dir)
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-");
  const manifest = {
    name,
    version: "0.1.0",
    private: true,
    type: "module",
    engines: engine.engines,
    scripts: {
      start: "ackbox start",
      test: "tsc -p tsconfig.json && vitest run",
      demo: "ackbox demo",
      manifest: "ackbox manifest",
      setup: "ackbox setup",
      deploy: "ackbox deploy",
      "check:deploy": "ackbox check-deploy",
    },
    dependencies: { ackbox: options.engine ?? `^${engine.version}` },
    devDependencies: Object.fromEntries(PROJECT_DEV_DEPENDENCIES.map((dep) => [dep, engine.devDependencies[dep]])),
    allowScripts: engine.allowScripts,
  };
  writeFileSync(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return filesUnder(dir);
}

function filesUnder(dir: string, prefix = ""): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true })
    .flatMap((entry) =>
      entry.isDirectory() ? filesUnder(dir, join(prefix, entry.name)) : entry.isFile() ? [join(prefix, entry.name)] : [],
    )
    .sort();
}

const USAGE = `Usage: npx ackbox new <folder> [--engine <version range | file:tarball>] [--no-install]

Creates <folder> with an app in one file (app/index.ts), its tests (npm test), the two Worker
entries over the engine, and the wrangler files; then runs npm install there. Then:
  cd <folder> && npm start      the app on this machine, against a local Slack stand-in
  npm run demo                  (beside npm start) Slack's traffic, and what reached the stand-in`;

/** The command: parses `argv` (what follows `new`), writes the project, installs it. */
export function main(argv: readonly string[]): void {
  let parsed: ReturnType<typeof parse>;
  function parse() {
    return parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: { engine: { type: "string" }, "no-install": { type: "boolean", default: false }, help: { type: "boolean", short: "h" } },
    });
  }
  try {
    parsed = parse();
  } catch (error) {
    console.error(`ackbox new: ${(error as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (parsed.values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const [dir, ...extra] = parsed.positionals;
  if (!dir || extra.length > 0) {
    console.error(`ackbox new: name one folder\n\n${USAGE}`);
    process.exit(2);
  }
  let files: string[];
  try {
    files = newProject({ dir, ...(parsed.values.engine ? { engine: parsed.values.engine } : {}) });
  } catch (error) {
    console.error(`ackbox new: ${(error as Error).message}`);
    process.exit(1);
  }
  console.log(`ackbox new: wrote ${files.length} files in ${resolve(dir)}:\n${files.map((file) => `  ${file}`).join("\n")}`);
  if (!parsed.values["no-install"]) {
    const npm = spawnSync("npm", ["install", "--no-fund", "--no-audit"], { cwd: dir, stdio: "inherit" });
    if (npm.status !== 0) {
      console.error(`ackbox new: npm install failed (${npm.status ?? npm.signal}); run it again in ${dir}`);
      process.exit(1);
    }
  }
  console.log(`\nNext: cd ${dir} && npm start   (then, beside it, npm run demo and npm test)`);
}

if (import.meta.main) main(process.argv.slice(2));
