/**
 * The app the node tests that start a local run assert about: the reference app as this repository ships it
 * (examples/reference/index.ts), given to the run as `app` (startPipeline) or ACKBOX_APP (npm start, npm run demo),
 * never the team's app/index.ts, whose replacement must break none of them.
 */
export const REFERENCE_APP = "examples/reference/index.ts";
