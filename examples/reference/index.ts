/**
 * The reference app as this repository ships it: beside the /ask example, /remind, /escalate (timers) and the
 * approval step (a custom step), the examples first and the reference app last (its command and button handlers
 * are catch-alls). The starter app/index.ts composes the same; this
 * copy is the examples' own, so what the local-run tests, the demo's test, the chaos run and the bench assert
 * about it holds whatever the team's app/index.ts becomes: `ACKBOX_APP=examples/reference/index.ts npm start`.
 */

import { createApp } from "../../shared/app/index.ts";
import { approvalApp } from "../approval/app.ts";
import { exampleApp } from "../ask/app.ts";
import { remindApp } from "../remind/app.ts";
import { referenceApp } from "./app.ts";

export const app = referenceApp(approvalApp(remindApp(exampleApp(createApp()))));
