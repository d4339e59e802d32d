/**
 * The ingress Worker the engine's tests run: the engine's factory over the engine's test app (test-app.ts), never
 * over app/index.ts (the team's), so replacing the team's app changes nothing these tests see. It is the `main` of
 * the workerd test projects (vitest.config.ts) and of the local ingress the CLI and dashboard tests start.
 */
import { ingress } from "../../../workers/ingress/worker.ts";
import { testApp } from "../test-app.ts";

export default ingress(testApp());
