/** The ingress Worker: Slack's Request URL (/slack/events), /healthz and the operator API, over your app. */
import { ingress } from "ackbox/ingress";
import { app } from "../../app/index.ts";

export default ingress(app);
