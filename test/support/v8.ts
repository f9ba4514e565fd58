// What V8 makes of an object, for tests of how objects are built.
import { setFlagsFromString } from "node:v8";
import { runInThisContext } from "node:vm";

/** Whether V8 holds `o` with fast properties, rather than as a hash table (%HasFastProperties). */
export const hasFastProperties = (() => {
  setFlagsFromString("--allow-natives-syntax");
  // Natives syntax is read by the parser, so the function is compiled after the flag is set.
  return runInThisContext("(o) => %HasFastProperties(o)") as (o: object) => boolean;
})();
