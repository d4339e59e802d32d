/**
 * Your app: what both Workers run, what `npm run manifest` describes and
 * what `npm run demo` drives. app/ is yours — write your handlers and
 * effects here (or anywhere under app/), with their tests beside them, and
 * compose them below; nothing outside app/ needs to change.
 *
 * This starter composes four of the shipped examples (examples/, each with
 * its own composition and tests, so replacing this file breaks none of
 * them): the /ask example, /remind and /escalate (timers), the approval step (a
 * custom step that waits for a click), then the reference app. The reference app's
 * command and button handlers are catch-alls (every command, every button),
 * so it goes last: a handler composed after a catch-all that matches it is
 * refused when the app is built (shared/app/app.ts), never silently unused.
 */
import { approvalApp } from "../examples/approval/app.ts";
import { exampleApp } from "../examples/ask/app.ts";
import { referenceApp } from "../examples/reference/app.ts";
import { remindApp } from "../examples/remind/app.ts";
import { createApp } from "../shared/app/index.ts";

export const app = referenceApp(approvalApp(remindApp(exampleApp(createApp()))));
