/**
 * The ingress Worker over the reference app as shipped (examples/reference/index.ts: the reference app beside
 * /ask), never over app/index.ts: the pipeline project's SELF, whose tests follow the examples' chains (the /ask
 * example's answer service among them) through both Workers.
 */
import { app } from "../../../examples/reference/index.ts";
import { ingress } from "../../../workers/ingress/worker.ts";

export default ingress(app);
