#!/usr/bin/env node
/**
 * `npx ackbox`: the operator's command line (docs/operating.md).
 * Node 22 runs this TypeScript directly (type stripping): erasable syntax
 * only, `.ts` import extensions.
 */
import { main } from "./main.ts";

const code = await main({
  argv: process.argv.slice(2),
  env: process.env,
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  isTty: process.stdout.isTTY === true,
});
process.exitCode = code;
