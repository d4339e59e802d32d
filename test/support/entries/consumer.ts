/**
 * The consumer Worker the engine's tests run: the engine's factory over the engine's test app (test-app.ts), never
 * over app/index.ts. The consumer project's `main` (its real queue deliveries) and the pipeline project's bundle.
 */
import { consumer } from "../../../workers/consumer/worker.ts";
import { testApp } from "../test-app.ts";

export default consumer(testApp());
