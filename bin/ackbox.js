#!/usr/bin/env node
// `npx ackbox`. In this repository Node runs the TypeScript (cli/ackbox.ts) itself. The package ships no cli/:
// installed, under node_modules, Node would strip no types (ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING), so it
// runs the build `npm pack` made (dist/, scripts/build-package.ts).
import { existsSync } from "node:fs";

const source = new URL("../cli/ackbox.ts", import.meta.url);
await import(existsSync(source) ? source.href : "../dist/ackbox.js");
