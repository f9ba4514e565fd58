// The etcd backend: the shared store contract against a real etcd on loopback (one etcd per
// file, a fresh key prefix per test), plus what only this backend promises.
import { afterAll, beforeAll, describe } from "vitest";
import { openEtcdStore } from "../../src/store/etcd.ts";
import { storeContract } from "../store-contract.ts";
import { etcdMissing, startEtcd, type EtcdCluster } from "../support/etcd.ts";

let etcd: EtcdCluster;
let n = 0;

describe.skipIf(etcdMissing)("etcd backend", () => {
  beforeAll(async () => {
    etcd = await startEtcd();
  }, 30_000);
  afterAll(async () => {
    await etcd?.stop();
  });

  storeContract("etcd", async () => {
    const prefix = `/loom-test-${process.pid}-${++n}`;
    return {
      store: await openEtcdStore({ endpoints: etcd.endpoints, prefix }),
      reopen: () => openEtcdStore({ endpoints: etcd.endpoints, prefix }),
      cleanup: async () => undefined,
    };
  });
});
