// Formatting of numbers, durations and times for people.

const intFmt = new Intl.NumberFormat("en-US");

export function int(n: number): string {
  return intFmt.format(Math.round(n));
}

// rate is "1.2k/s" style.
export function rate(perSec: number): string {
  if (!Number.isFinite(perSec) || perSec <= 0) return "–";
  if (perSec >= 1000) return (perSec / 1000).toFixed(perSec >= 10000 ? 0 : 1) + "k/s";
  if (perSec >= 10) return perSec.toFixed(0) + "/s";
  return perSec.toFixed(1) + "/s";
}

// duration is "3h 4m", "4m 05s", "12s" for a number of seconds.
export function duration(sec: number | null | undefined): string {
  if (sec === null || sec === undefined || !Number.isFinite(sec) || sec < 0) return "–";
  const s = Math.round(sec);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return `${hr}h ${m % 60}m`;
  return `${Math.floor(hr / 24)}d ${hr % 24}h`;
}

// ms is a duration given in milliseconds, with a unit that fits.
export function ms(v: number): string {
  if (!Number.isFinite(v)) return "–";
  if (v < 1) return (v * 1000).toFixed(0) + " µs";
  if (v < 1000) return v.toFixed(v < 10 ? 1 : 0) + " ms";
  return (v / 1000).toFixed(1) + " s";
}

// timeFmt is made once: Date.toLocaleString builds a new formatter on every
// call, which made a page of 100 jobs take a long task of its own.
const timeFmt = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "numeric",
  day: "numeric",
  hour: "numeric",
  minute: "2-digit",
  second: "2-digit",
});

export function time(iso: string | null | undefined): string {
  if (!iso) return "–";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return timeFmt.format(d);
}

// cellText is how a JSON value reads in a grid cell.
export function cellText(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return JSON.stringify(v);
}

// count is "1 item", "2 items".
export function count(n: number, noun: string): string {
  return `${int(n)} ${noun}${n === 1 ? "" : "s"}`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(0)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}
