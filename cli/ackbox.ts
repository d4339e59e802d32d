#!/usr/bin/env node
/**
 * `npx ackbox`: the project's commands (what `npm start`, `npm run demo`, … run in a project that depends on the
 * engine) and the operator's command line (docs/operating.md). Node 22 runs this TypeScript directly in this
 * repository (type stripping: erasable syntax only, `.ts` import extensions); bin/ackbox.js runs its build when
 * the engine is installed as a package.
 */
import { main } from "./main.ts";

/** Each runs its script as `node cli/project/<name>.ts` would, with the command's own arguments after it. */
const PROJECT_COMMANDS: Readonly<Record<string, () => Promise<unknown>>> = {
  new: async () => (await import("./project/new-app.ts")).main(process.argv.slice(2)),
  start: () => import("./project/start.ts"),
  demo: () => import("./project/demo.ts"),
  manifest: () => import("./project/manifest.ts"),
  setup: () => import("./project/setup.ts"),
  deploy: () => import("./project/deploy.ts"),
  "check-deploy": () => import("./project/check-deploy.ts"),
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
