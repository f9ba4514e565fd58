// A read of the Hub's own figures, made again after the page's objects change: at most one
// request in flight and at most one every `gapMs`; changes that arrive meanwhile ask for one
// more read, not one each.
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: Error };

export class Refresh<T> {
  private at = 0;
  private pending = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly load: () => Promise<T>,
    private readonly done: (r: Outcome<T>) => void,
    private readonly gapMs: number,
  ) {}

  request(): void {
    if (this.stopped) return;
    if (this.pending) return void (this.again = true);
    this.pending = true;
    setTimeout(
      () => {
        this.at = Date.now();
        // Both outcomes are handled by the first then(): nothing is left to reject.
        void this.load()
          .then(
            (value) => ({ ok: true, value }) as const,
            (error: Error) => ({ ok: false, error }) as const,
          )
          .then((r) => {
            if (!this.stopped) this.done(r);
          })
          .finally(() => {
            this.pending = false;
            if (this.again) {
              this.again = false;
              this.request();
            }
          });
      },
      Math.max(0, this.at + this.gapMs - Date.now()),
    );
  }

  stop(): void {
    this.stopped = true;
  }
}
