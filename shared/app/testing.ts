/**
 * The test kit for app authors (the package's `ackbox/testing`): what an app's own tests use, inside workerd
 * with the vitest plugin. Nothing here is for the Workers themselves.
 */
export { type EdgeCall, type PathResult, type WholePath, type WholePathOptions, wholePath } from "./whole-path.ts";
