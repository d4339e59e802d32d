/** This project's ingress Worker: the engine's (worker.ts) over the app in app/index.ts. */
import { app } from "../../app/index.ts";
import { ingress } from "./worker.ts";

export default ingress(app);
