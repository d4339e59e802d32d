/** The consumer Worker over the reference app as shipped, beside reference-ingress.ts: the pipeline project's bundle. */
import { app } from "../../../examples/reference/index.ts";
import { consumer } from "../../../workers/consumer/worker.ts";

export default consumer(app);
