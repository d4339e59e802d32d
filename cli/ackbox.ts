#!/usr/bin/env node
/**
 * `npx ackbox`: the project's commands (what `npm start`, `npm run demo`, … run in a project that depends on the
 * engine) and the operator's command line (docs/operating.md). Node 22 runs this TypeScript directly in this
 * repository (type stripping: erasable syntax only, `.ts` import extensions); bin/ackbox.js runs its build when
 * the engine is installed as a package.
 */
import { main } from "./main.ts";

/** Each runs its script as `node scripts/<name>.ts` would, with the command's own arguments after it. */
const PROJECT_COMMANDS: Readonly<Record<string, () => Promise<unknown>>> = {
  new: async () => (await import("../scripts/new-app.ts")).main(process.argv.slice(2)),
  start: () => import("../scripts/start.ts"),
  demo: () => import("../scripts/demo.ts"),
  manifest: () => import("../scripts/manifest.ts"),
  setup: () => import("../scripts/setup.ts"),
  deploy: () => import("../scripts/deploy.ts"),
  "check-deploy": () => import("../scripts/check-deploy.ts"),
};

const project = PROJECT_COMMANDS[process.argv[2] ?? ""];
if (project) {
  process.argv.splice(2, 1);
  await project();
} else {
  process.exitCode = await main({
    argv: process.argv.slice(2),
    env: process.env,
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    isTty: process.stdout.isTTY === true,
  });
}
