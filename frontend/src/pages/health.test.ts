import { describe, expect, it } from "vitest";
import { History } from "./health";

const at = (s: number) => new Date(Date.UTC(2026, 10, 26, 8, 0, s, 0) + 120).toISOString().replace(".120Z", ".12Z");

describe("History", () => {
  it("merges polls, skips points it has and keeps the newest time", () => {
    const h = new History();
    h.add({ everyMs: 1000, capacity: 3, queueDue: [{ t: at(1), v: 5 }, { t: at(2), v: 4 }], hosts: {} });
    // A later poll may repeat the last point; it counts once.
    h.add({
      everyMs: 1000,
      capacity: 3,
      queueDue: [{ t: at(2), v: 4 }, { t: at(3), v: 3 }, { t: at(4), v: 2 }],
      errorsPerSec: { transient: [{ t: at(4), v: 0.5 }] },
      hosts: { "api.example.com": { rate: [{ t: at(4), v: 40 }], concurrency: [{ t: at(4), v: 6 }] } },
    });
    expect(h.values("queueDue")).toEqual([4, 3, 2]); // trimmed to capacity
    expect(h.newest).toBe(at(4));
    expect(h.group("errorsPerSec.")).toEqual([{ name: "transient", values: [0.5] }]);
    expect(h.group("hosts.", ".rate")).toEqual([{ name: "api.example.com", values: [40] }]);
    expect(h.group("hosts.", ".concurrency")).toEqual([{ name: "api.example.com", values: [6] }]);
  });
  it("compares times as times, not as text", () => {
    // "…01.5Z" sorts after "…01.12Z" as text but is earlier than 02.
    const h = new History();
    h.add({ everyMs: 1000, capacity: 10, itemsPerSec: [{ t: "2026-11-26T08:00:01.5Z", v: 1 }], hosts: {} });
    h.add({ everyMs: 1000, capacity: 10, itemsPerSec: [{ t: "2026-11-26T08:00:02.12Z", v: 2 }], hosts: {} });
    expect(h.values("itemsPerSec")).toEqual([1, 2]);
    expect(h.newest).toBe("2026-11-26T08:00:02.12Z");
  });
});
