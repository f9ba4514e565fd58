// A child process for the crash test: writes Tasks as fast as the store takes them, many at
// once (so they share group commits), and prints each name once its write is acknowledged.
import { openSqliteStore } from "../../src/store/sqlite.ts";

const store = openSqliteStore(process.argv[2]);
let n = 0;
async function writer(id: number) {
  for (;;) {
    const name = `t-${process.argv[3]}-${id}-${n++}`;
    await store.create({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Task",
      metadata: { name },
      spec: { campaign_id: "crash", execution_profile: { placement: "shared" } },
    });
    process.stdout.write(`${name}\n`);
  }
}
for (let i = 0; i < 16; i++) void writer(i);
