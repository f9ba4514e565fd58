// RFC 3339 timestamps, as every stored time is written.

let lastMs = Number.NaN;
let lastText = "";

/**
 * The RFC 3339 text of a time in ms since the epoch. One write stamps the same instant in
 * several fields (a lease's start, a condition's transition, an attempt's end), and
 * toISOString is not cheap, so the last time asked for is kept.
 */
export function iso(ms: number): string {
  if (ms !== lastMs) {
    lastText = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastText;
}
