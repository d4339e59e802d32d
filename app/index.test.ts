/**
 * Your app's own tests go beside it, here in app/. This one holds for any
 * app, so it stays true while you compose yours: `npm run manifest` can
 * describe everything the app registers, with nothing left to warn about (a
 * RegExp command without `names`, a method or event whose scope is unknown).
 * Test your handlers and effects with the kit (shared/app/testing.ts), as
 * examples/standup/app.test.ts does.
 */
import { describe, expect, it } from "vitest";
import { manifestOf } from "../shared/app/index.ts";
import { app } from "./index.ts";

describe("the app both Workers run", () => {
  it("has a manifest that asks Slack for everything it registers, with no warning", () => {
    const { manifest, warnings } = manifestOf(app, { url: "https://your-ingress.example" });
    expect(warnings).toEqual([]);
    expect(manifest.oauth_config).toBeDefined();
  });
});
