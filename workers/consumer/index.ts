/** This project's consumer Worker: the engine's (worker.ts) over the app in app/index.ts. */
import { app } from "../../app/index.ts";
import { consumer } from "./worker.ts";

export default consumer(app);
