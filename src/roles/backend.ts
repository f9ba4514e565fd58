// The store a Hub runs on and who leads on it, built in one place for both backends: the
// embedded SQLite file under the data dir, whose sole Hub always leads and holds the dir's
// lock, or an etcd cluster shared by replicas that elect a leader. `loom hub migrate`
// opens its two stores here too.
import { hostname } from "node:os";
import { join } from "node:path";
import type { EtcdStore, EtcdStoreOptions } from "../store/etcd.ts";
import { EVENT_TTL_SECONDS } from "../reconciler/events.ts";
import { lockDataDir } from "../store/dir-lock.ts";
import { openSqliteStore, type SqliteStoreOptions } from "../store/sqlite.ts";
import type { Store } from "../store/store.ts";
import { SoleLeader, type Leadership } from "./leader.ts";

/** Which store: SQLite under a data dir, or etcd. */
export type StoreSpec =
  { kind: "sqlite"; dataDir: string; sqlite?: SqliteStoreOptions } | { kind: "etcd"; etcd: EtcdStoreOptions };

/** A Hub's backend: the store, and for etcd this replica's name and how soon a silent leader is replaced. */
export type BackendSpec =
  | { kind: "sqlite"; sqlite?: SqliteStoreOptions }
  | { kind: "etcd"; etcd: EtcdStoreOptions; replicaId?: string; leaderTtlSeconds?: number; log?: (m: string) => void };

/** An open backend; `release` lets go of what it holds besides the store (the data dir's lock). */
export type Backend = { store: Store; leadership: Leadership; release(): void };

/** This process's default name among the replicas. */
export const defaultReplicaId = (): string => `${hostname()}-${process.pid}`;

/**
 * The etcd client and everything under it (gRPC, protobuf) load only when a Hub uses etcd.
 * etcd deletes Events itself once their time to live has passed (a lease on each key).
 */
async function openEtcd(o: EtcdStoreOptions): Promise<EtcdStore> {
  return (await import("../store/etcd.ts")).openEtcdStore({
    ...o,
    ttlSeconds: { Event: EVENT_TTL_SECONDS, ...o.ttlSeconds },
  });
}

export async function openStore(spec: StoreSpec): Promise<Store> {
  return spec.kind === "sqlite" ? openSqliteStore(join(spec.dataDir, "loom.db"), spec.sqlite) : openEtcd(spec.etcd);
}

/**
 * Open the backend of a Hub whose data dir is `dataDir` (which exists). On SQLite the dir is
 * locked first: one Hub per SQLite file; replicas on etcd coordinate through it instead.
 */
export async function openBackend(spec: BackendSpec, dataDir: string): Promise<Backend> {
  if (spec.kind === "sqlite") {
    const unlock = lockDataDir(dataDir);
    try {
      return {
        store: await openStore({ kind: "sqlite", dataDir, sqlite: spec.sqlite }),
        leadership: new SoleLeader(defaultReplicaId()),
        release: unlock,
      };
    } catch (e) {
      unlock();
      throw e;
    }
  }
  const store = await openEtcd(spec.etcd);
  const { EtcdLeadership } = await import("./etcd-leader.ts");
  const leadership = new EtcdLeadership(store.etcd, store.prefix, spec.replicaId ?? defaultReplicaId(), {
    ttlSeconds: spec.leaderTtlSeconds,
    log: spec.log,
  });
  return { store, leadership, release: () => {} };
}
