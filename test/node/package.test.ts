/**
 * The engine as a package, the cheap part (the whole proof, a fresh project on the packed engine running
 * npm start, its tests and the demo, is `npm run check:package`, scripts/check-package.ts): what `npm pack`
 * ships, that the built Worker entries import nothing workerd lacks, what `npx ackbox new` writes, and where
 * the engine's commands find the project when they run from node_modules.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, normalize, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN_FILE, engineRootOf, MODEL_KEY_FILE, PROJECT_ROOT, projectRootOf, TOKEN_KEY_FILE } from "../../cli/local/run-info.ts";
import { newProject } from "../../cli/project/new-app.ts";
import { PACKAGE_ENTRIES } from "../../scripts/build-package.ts";

const ROOT = join(import.meta.dirname, "../..");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const temp = mkdtempSync(join(tmpdir(), "ackbox-package-"));
afterAll(() => rmSync(temp, { recursive: true, force: true }));

describe("npm pack", () => {
  // A local run's folder holds the admin token, the token key and the model key under plain names (run-info.ts); one
  // placed inside a shipped folder (ACKBOX_LOCAL_DIR=shared/run) must still not ship them. Planted for the pack.
  const planted = join(ROOT, "shared", "planted-run-dir");
  const [packed] = (() => {
    mkdirSync(planted, { recursive: true });
    for (const name of [ADMIN_TOKEN_FILE, TOKEN_KEY_FILE, MODEL_KEY_FILE]) writeFileSync(join(planted, name), "planted\n");
    try {
      // --dry-run still runs prepack, the build: the list is what a real pack ships.
      return JSON.parse(
        execFileSync("npm", ["pack", "--dry-run", "--json"], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }),
      ) as [{ files: { path: string }[] }];
    } finally {
      rmSync(planted, { recursive: true, force: true });
    }
  })();
  const files = packed.files.map((file) => file.path);

  it("ships no local secret or state: `files` excludes them inside its folders (a .gitignore does not), and no dot path is packed but .dev.vars.example", () => {
    // wrangler reads a .dev.vars beside each config (workers/consumer/ has one), and keeps state in .wrangler/.
    for (const excluded of ["!**/.dev.vars", "!**/.dev.vars.*", "!**/.env*", "!**/.wrangler/", "!**/.admin-token", "!**/.ackbox/"])
      expect(pkg.files, excluded).toContain(excluded);
    expect(files.filter((path) => path.split("/").some((part) => part.startsWith(".")))).toEqual([".dev.vars.example"]);
    expect(files.filter((path) => path.startsWith("shared/planted-run-dir/"))).toEqual([]);
  });

  it("ships the built entries, the bin, every migration, the template and the wrangler files", () => {
    const targets = Object.values(pkg.exports as Record<string, string | { types: string; default: string }>).flatMap((target) =>
      typeof target === "string" ? [target] : [target.types, target.default],
    );
    const wanted = [
      ...targets.map((path) => normalize(path)),
      pkg.bin.ackbox,
      ...Object.keys(PACKAGE_ENTRIES).map((name) => `dist/${name}.js`),
      ...readdirSync(join(ROOT, "migrations")).map((name) => `migrations/${name}`),
      "template/app/index.ts",
      "template/app/index.test.ts",
      "template/workers/ingress/index.ts",
      "template/workers/consumer/index.ts",
      "wrangler.toml",
      "workers/consumer/wrangler.toml",
      "CHANGELOG.md",
    ];
    expect(wanted.filter((path) => !files.includes(path))).toEqual([]);
  });

  it("ships no tests, no app of this repository and no TypeScript Node would refuse to run from node_modules", () => {
    const unwanted = files.filter((path) =>
      /^(test|app|cli|scripts|docs|\.ci)\/|^workers\/(ingress|consumer)\/index\.ts$|\.test\.ts$/.test(path.replace(/^template\/.*/, "")),
    );
    expect(unwanted).toEqual([]);
  });

  it("builds Worker entries that import only the package's own dependencies: no node: module, no dev tool", () => {
    const reached = new Set<string>();
    const outside = new Set<string>();
    const visit = (file: string) => {
      if (reached.has(file)) return;
      reached.add(file);
      for (const [, specifier] of readFileSync(join(ROOT, file), "utf8").matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)) {
        if (specifier?.startsWith(".")) visit(normalize(join(dirname(file), specifier)));
        else if (specifier) outside.add(specifier);
      }
    };
    for (const entry of ["index", "ingress", "consumer", "testing"]) visit(`dist/${entry}.js`);
    expect(reached.size).toBeGreaterThan(4);
    expect([...outside].filter((name) => !Object.keys(pkg.dependencies).includes(name))).toEqual([]);
  });
});

describe("npx ackbox new", () => {
  it("writes the template, the wrangler files reading the package's migrations, and scripts that are the engine's commands", () => {
    const dir = join(temp, "my-app");
    const files = newProject({ dir, engine: "file:../ackbox.tgz" });
    expect(files).toEqual(
      expect.arrayContaining([".gitignore", "app/index.ts", "app/index.test.ts", "package.json", "vitest.config.ts", "wrangler.toml"]),
    );
    expect(files).not.toContain("gitignore");
    // What the project's commands write that must never be committed: the local secrets, the deployed operator token.
    const ignored = readFileSync(join(dir, ".gitignore"), "utf8").split("\n");
    expect(ignored).toEqual(
      expect.arrayContaining([
        ".dev.vars",
        ".dev.vars.*",
        "!.dev.vars.example",
        ".env*",
        ".admin-token",
        ".ackbox/",
        ".wrangler/",
        "node_modules/",
      ]),
    );
    expect(readFileSync(join(dir, "wrangler.toml"), "utf8")).toContain('migrations_dir = "node_modules/ackbox/migrations"');
    expect(readFileSync(join(dir, "workers/consumer/wrangler.toml"), "utf8")).toContain(
      'migrations_dir = "../../node_modules/ackbox/migrations"',
    );
    expect(readFileSync(join(dir, "workers/ingress/index.ts"), "utf8")).toContain("export default ingress(app);");
    const project = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    expect(project).toMatchObject({
      name: "my-app",
      dependencies: { ackbox: "file:../ackbox.tgz" },
      scripts: { start: "ackbox start", demo: "ackbox demo", manifest: "ackbox manifest", deploy: "ackbox deploy" },
      devDependencies: { wrangler: pkg.devDependencies.wrangler, node: pkg.devDependencies.node },
    });
    expect(newProject({ dir: join(temp, "ranged") }).length).toBe(files.length);
    expect(JSON.parse(readFileSync(join(temp, "ranged", "package.json"), "utf8")).dependencies).toEqual({ ackbox: `^${pkg.version}` });
  });

  it("refuses a folder that holds anything, and writes nothing there", () => {
    const dir = join(temp, "taken");
    newProject({ dir: join(temp, "seed") });
    rmSync(dir, { recursive: true, force: true });
    execFileSync("mkdir", ["-p", dir]);
    writeFileSync(join(dir, "notes.txt"), "mine");
    expect(() => newProject({ dir })).toThrow(/is not empty/);
    expect(readdirSync(dir)).toEqual(["notes.txt"]);
  });
});

describe("the template", () => {
  it("imports the engine only through the package's exports, and nothing outside the project", () => {
    const dir = join(temp, "imports");
    const exported = Object.keys(pkg.exports).map((subpath) => `ackbox${subpath.slice(1)}`);
    const imports = newProject({ dir })
      .filter((file) => file.endsWith(".ts"))
      .flatMap((file) =>
        [...readFileSync(join(dir, file), "utf8").matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)].map((m) => ({
          file,
          specifier: m[1] ?? "",
        })),
      );
    expect(imports.filter(({ specifier }) => specifier.startsWith("ackbox")).length).toBeGreaterThan(3);
    const wrong = imports.filter(({ file, specifier }) =>
      specifier.startsWith(".")
        ? !resolve(dir, dirname(file), specifier).startsWith(`${dir}/`)
        : !exported.includes(specifier) && !/^(cloudflare:|vitest|@cloudflare\/)/.test(specifier),
    );
    expect(wrong).toEqual([]);
  });
});

describe("the engine's commands, run from a package", () => {
  it("read the project that holds node_modules, and in this repository the repository itself", () => {
    expect(projectRootOf("/work/my-app/node_modules/ackbox")).toBe("/work/my-app");
    expect(projectRootOf("/work/my-app/node_modules/.pnpm/ackbox@0.2.0/node_modules/ackbox")).toBe("/work/my-app");
    expect(projectRootOf(ROOT)).toBe(ROOT);
    expect(PROJECT_ROOT).toBe(normalize(ROOT).replace(/\/$/, ""));
    expect(engineRootOf(join(ROOT, "dist", "chunks"))).toBe(normalize(ROOT).replace(/\/$/, ""));
    expect(() => engineRootOf(tmpdir())).toThrow(/no package.json named "ackbox"/);
  });
});
