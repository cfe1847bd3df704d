import { describe, expect, it } from "vitest";
import type { Item, Page } from "./api";
import { Pager } from "./pager";

// fakeAPI serves n rows in keyset pages, the cursor being the last row's
// index; it counts requests.
function fakeAPI(n: number) {
  const calls: (string | null)[] = [];
  const fetch = async (after: string | null, size: number): Promise<Page> => {
    calls.push(after);
    const from = after === null ? 0 : Number(after) + 1;
    const items: Item[] = [];
    for (let i = from; i < Math.min(n, from + size); i++) items.push({ id: i + 1, seq: i + 1 } as Item);
    const more = from + size < n;
    return { items, next: more ? String(from + size - 1) : null };
  };
  return { fetch, calls };
}

function settle(p: Pager): Promise<void> {
  return new Promise((resolve) => {
    const tick = () => {
      if (p.walk === null && (p as unknown as { running: boolean }).running === false) resolve();
      else setTimeout(tick, 1);
    };
    setTimeout(tick, 1);
  });
}

describe("Pager", () => {
  it("walks to a deep block once, then reaches it directly", async () => {
    const api = fakeAPI(10_000);
    const p = new Pager(api.fetch, 100, 5);
    p.want(9_950, 9_999);
    await settle(p);
    expect(p.row(9_999)?.seq).toBe(10_000);
    expect(p.knownRows()).toBe(10_000);
    expect(api.calls.length).toBe(100);
    p.want(0, 10);
    await settle(p);
    p.want(5_000, 5_010);
    await settle(p);
    expect(p.row(5_000)?.seq).toBe(5_001);
    // Block 0 had left the LRU: one request; block 50 has a known cursor: one.
    expect(api.calls.length).toBe(102);
  });

  it("keeps at most maxBlocks blocks", async () => {
    const api = fakeAPI(3_000);
    const p = new Pager(api.fetch, 100, 3);
    p.want(2_990, 2_999);
    await settle(p);
    expect(p.row(0)).toBeUndefined();
    expect(p.row(2_999)?.seq).toBe(3_000);
  });

  it("reset forgets cursors, refresh keeps them", async () => {
    const api = fakeAPI(1_000);
    const p = new Pager(api.fetch, 100, 3);
    p.want(950, 960);
    await settle(p);
    const n = api.calls.length;
    p.refresh();
    expect(p.row(955)?.seq).toBe(956); // still shown while read again
    await settle(p);
    expect(api.calls.length).toBe(n + 1);
    p.reset();
    await settle(p);
    expect(api.calls.length).toBe(n + 1 + 10);
  });
});
