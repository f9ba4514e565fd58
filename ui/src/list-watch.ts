// List, then follow the Hub's watch stream (newline-delimited JSON) from the list's
// resourceVersion. After a disconnect it resumes from the last resourceVersion it saw
// (events and BOOKMARKs both carry one); when the Hub answers 410 Gone (the revision was
// compacted away, or the watcher was cut off as too slow) it lists again. A stream that
// stays silent longer than `staleMs` (BOOKMARKs come every 15 s) is treated as dead.
// No DOM here: the same code runs under Node in the tests, against a real Hub.

export type Meta = {
  name: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  creationTimestamp?: string;
};
export type KubeObject = { kind?: string; metadata: Meta };
export type ChangeType = "ADDED" | "MODIFIED" | "DELETED";
export type Phase = "listing" | "watching" | "retrying" | "unauthorized" | "stopped";

export type Request = (path: string, init: { signal: AbortSignal }) => Promise<Response>;

export type ListWatchOptions<T extends KubeObject> = {
  /** Collection path, with a selector query if any: /apis/loom.dev/v1alpha1/tasks */
  path: string;
  request: Request;
  /** The whole collection, after a (re)list. */
  onReset(items: T[]): void;
  onChange(type: ChangeType, obj: T): void;
  onPhase?(phase: Phase, detail: string): void;
  /** Delay before the nth retry in a row (from 1). */
  retryDelayMs?(attempt: number): number;
  staleMs?: number;
};

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const defaultDelay = (n: number) => Math.min(30_000, 500 * 2 ** Math.min(n - 1, 6)) * (0.75 + Math.random() / 2);

export class ListWatch<T extends KubeObject> {
  resourceVersion: string | undefined;
  /** Counters a status line (and a test) can read. */
  readonly stats = { lists: 0, resumes: 0, gone: 0, events: 0, lastEventAt: 0 };
  private abort: AbortController | undefined;
  private stopped = true;

  constructor(private readonly o: ListWatchOptions<T>) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
    this.o.onPhase?.("stopped", "");
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      this.abort = new AbortController();
      try {
        if (this.resourceVersion === undefined) await this.list(this.abort.signal);
        else this.stats.resumes++;
        await this.watch(this.abort.signal);
        failures = 0; // the Hub ended the stream cleanly: resume at once
      } catch (e) {
        if (this.stopped) return;
        if (e instanceof HttpError && e.status === 410) {
          this.stats.gone++;
          this.resourceVersion = undefined;
          this.o.onPhase?.("listing", "the Hub no longer has our resourceVersion (410): listing again");
          continue;
        }
        if (e instanceof HttpError && (e.status === 401 || e.status === 403)) {
          this.stopped = true;
          this.o.onPhase?.("unauthorized", e.message);
          return;
        }
        failures++;
        const ms = (this.o.retryDelayMs ?? defaultDelay)(failures);
        this.o.onPhase?.("retrying", `${(e as Error).message}; retrying in ${Math.round(ms / 100) / 10} s`);
        await new Promise((r) => setTimeout(r, ms));
      } finally {
        this.abort.abort(); // a stream left by an error must not stay open
      }
    }
  }

  private async list(signal: AbortSignal): Promise<void> {
    this.o.onPhase?.("listing", "");
    const res = await this.o.request(this.o.path, { signal });
    if (!res.ok) throw new HttpError(res.status, await errorText(res));
    const body = (await res.json()) as { metadata?: { resourceVersion?: string }; items?: T[] };
    this.stats.lists++;
    this.resourceVersion = body.metadata?.resourceVersion ?? "0";
    this.o.onReset(body.items ?? []);
  }

  private async watch(signal: AbortSignal): Promise<void> {
    const sep = this.o.path.includes("?") ? "&" : "?";
    const url = `${this.o.path}${sep}watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(this.resourceVersion ?? "0")}`;
    const res = await this.o.request(url, { signal });
    if (!res.ok) throw new HttpError(res.status, await errorText(res));
    if (!res.body) throw new Error("the watch response has no body");
    this.o.onPhase?.("watching", "");
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    const staleMs = this.o.staleMs ?? 45_000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stale = false;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        stale = true;
        void reader.cancel();
      }, staleMs);
    };
    let buf = "";
    try {
      arm();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buf += value;
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line) this.handle(JSON.parse(line) as { type: string; object: T & { code?: number; message?: string } });
        }
      }
    } finally {
      clearTimeout(timer);
    }
    if (stale) throw new Error(`no data from the watch for ${staleMs / 1000} s`);
    if (signal.aborted) throw new Error("stopped");
  }

  private handle(ev: { type: string; object: T & { code?: number; message?: string } }): void {
    if (ev.type === "ERROR") {
      const code = ev.object.code ?? 500;
      throw new HttpError(code, ev.object.message ?? "watch error");
    }
    const rv = ev.object.metadata?.resourceVersion;
    if (rv) this.resourceVersion = rv;
    if (ev.type === "BOOKMARK") return;
    this.stats.events++;
    this.stats.lastEventAt = Date.now();
    this.o.onChange(ev.type as ChangeType, ev.object);
  }
}

async function errorText(res: Response): Promise<string> {
  const text = await res.text().catch(() => "");
  try {
    const j = JSON.parse(text) as { message?: string; error?: string; detail?: string };
    return `${res.status} ${j.message ?? j.detail ?? j.error ?? text}`;
  } catch {
    return `${res.status} ${text.slice(0, 200)}`;
  }
}
