// Health checks in the Kubernetes shape: /livez (the process serves), /readyz (it can do its
// job: the informer has synced and the store commits), /healthz (both). Each check answers
// with a short reason when it fails; nothing in a reason is sensitive (no paths, no tokens).
import { StoreError } from "../store/errors.ts";

export type HealthCheck = { name: string; run(): Promise<string | undefined> };
export type CheckResult = { name: string; ok: boolean; reason?: string };

/** Tracks the scheduler's commits: the store is failing from a failed commit until the next success. */
export class CommitHealth {
  private failure: { at: number; message: string } | undefined;

  commit(_seconds: number, _ops: number, error?: unknown): void {
    if (error === undefined) this.failure = undefined;
    else if (!(error instanceof StoreError))
      this.failure = { at: Date.now(), message: (error as Error)?.message ?? String(error) };
  }

  get failing(): string | undefined {
    return this.failure ? `the last store commit failed at ${new Date(this.failure.at).toISOString()}` : undefined;
  }
}

/** Resolves to a reason when `p` does not settle within `ms` or rejects. */
export async function within(p: Promise<unknown>, ms: number, what: string): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string>(
    (resolve) => (timer = setTimeout(() => resolve(`${what} did not answer within ${ms} ms`), ms)),
  );
  try {
    return await Promise.race([
      p.then(
        () => undefined,
        () => `${what} failed`,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export async function runChecks(checks: HealthCheck[], exclude: string[] = []): Promise<CheckResult[]> {
  return Promise.all(
    checks
      .filter((c) => !exclude.includes(c.name))
      .map(async (c) => {
        const reason = await c.run().catch((e: unknown) => `check failed: ${(e as Error)?.message ?? e}`);
        return reason === undefined ? { name: c.name, ok: true } : { name: c.name, ok: false, reason };
      }),
  );
}

/** The Kubernetes text body: `ok`, or with ?verbose (or on failure) one `[+]name ok` / `[-]name failed: reason` line per check. */
export function renderChecks(endpoint: string, results: CheckResult[], verbose: boolean): string {
  const ok = results.every((r) => r.ok);
  if (ok && !verbose) return "ok";
  const lines = results.map((r) => (r.ok ? `[+]${r.name} ok` : `[-]${r.name} failed: ${r.reason}`));
  return `${lines.join("\n")}\n${endpoint} check ${ok ? "passed" : "failed"}\n`;
}
