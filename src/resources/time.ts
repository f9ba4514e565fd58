// RFC 3339 timestamps, as every stored time is written.

/** The last two times asked for and their text: a lease's grant stamps now and now + its length, in turn. */
const msAt = [Number.NaN, Number.NaN];
const textAt = ["", ""];
let next = 0;

/**
 * The RFC 3339 text of a time in ms since the epoch. One write stamps the same instant in
 * several fields (a lease's start, a condition's transition, an attempt's end), and
 * toISOString is not cheap, so the last two times asked for are kept.
 */
export function iso(ms: number): string {
  if (ms === msAt[0]) return textAt[0];
  if (ms === msAt[1]) return textAt[1];
  const text = new Date(ms).toISOString();
  msAt[next] = ms;
  textAt[next] = text;
  next ^= 1;
  return text;
}
