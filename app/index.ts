/**
 * The app both Workers run: the example's handlers first (its /ask must win
 * over the reference app's catch-all command), then the reference app's.
 * First match wins (shared/app/app.ts), so order is the precedence.
 */
import { createApp } from "../shared/app/index.ts";
import { exampleApp } from "./example.ts";
import { referenceApp } from "./reference.ts";

export const app = referenceApp(exampleApp(createApp()));
