/** The consumer Worker: performs what the ingress recorded (queue), parks dead letters, sweeps (cron), over your app. */
import { consumer } from "ackbox/consumer";
import { app } from "../../app/index.ts";

export default consumer(app);
