// ISO 8601 text of whole-second times, as Date#toISOString writes them but several times faster:
// two per generated record (its create and update times) made toISOString a visible share of a
// big page. Days are converted once each and remembered.

const two: string[] = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));
const days = new Map<number, string>();
const MAX_DAYS = 20_000;

/** `new Date(seconds * 1000).toISOString()` for a whole number of seconds. */
export function isoSeconds(seconds: number): string {
  if (!Number.isSafeInteger(seconds) || seconds < 0 || seconds >= 253_402_300_800) return new Date(seconds * 1000).toISOString();
  const day = Math.floor(seconds / 86_400);
  let date = days.get(day);
  if (date === undefined) {
    // `YYYY-MM-DDT` of that day.
    date = new Date(day * 86_400_000).toISOString().slice(0, 11);
    if (days.size >= MAX_DAYS) days.clear();
    days.set(day, date);
  }
  const s = seconds - day * 86_400;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s - h * 3600) / 60);
  return `${date}${two[h]}:${two[m]}:${two[s - h * 3600 - m * 60]}.000Z`;
}
