import { describe, expect, it } from "vitest";
import type { Item, Page } from "./api";
import { Pager } from "./pager";

// fakeAPI serves n rows by position, as GET /items?at= does (the total
// with every page but the first); it records the positions asked for and
// how many requests were aborted. Answers wait for release() when held.
function fakeAPI(n: number, held = false) {
  const calls: number[] = [];
  let aborted = 0;
  const waiting: (() => void)[] = [];
  const fetch = (at: number, size: number, signal: AbortSignal): Promise<Page> => {
    calls.push(at);
    const items: Item[] = [];
    for (let i = at; i < Math.min(n, at + size); i++) items.push({ id: i + 1, seq: i + 1 } as Item);
    const page: Page = { items, next: at + size < n ? "c" + (at + size - 1) : null, at, total: at > 0 ? n : undefined };
    return new Promise((resolve, reject) => {
      const answer = () => (signal.aborted ? reject(Object.assign(new Error("aborted"), { name: "AbortError" })) : resolve(page));
      signal.addEventListener("abort", () => {
        aborted++;
        reject(Object.assign(new Error("aborted"), { name: "AbortError" }));
      });
      if (held) waiting.push(answer);
      else setTimeout(answer, 0);
    });
  };
  return {
    fetch,
    calls,
    aborted: () => aborted,
    release: () => waiting.splice(0).forEach((f) => f()),
  };
}

function settle(p: Pager): Promise<void> {
  return new Promise((resolve) => {
    const tick = () => (p.pending() === 0 ? resolve() : setTimeout(tick, 1));
    setTimeout(tick, 1);
  });
}

describe("Pager", () => {
  it("reaches a deep block in one request, by position", async () => {
    const api = fakeAPI(1_000_000);
    const p = new Pager(api.fetch, 250, 5);
    p.want(999_950, 999_999);
    await settle(p);
    expect(p.row(999_999)?.seq).toBe(1_000_000);
    expect(p.row(999_950)?.seq).toBe(999_951);
    expect(api.calls).toEqual([999_750]);
    expect(p.knownRows()).toBe(1_000_000);
    p.want(500_010, 500_020);
    await settle(p);
    expect(p.row(500_010)?.seq).toBe(500_011);
    expect(api.calls).toEqual([999_750, 500_000]);
  });

  it("asks for the blocks on screen first, at most maxFlight at once", async () => {
    const api = fakeAPI(10_000, true);
    const p = new Pager(api.fetch, 100, 10, 2);
    p.want(350, 650); // blocks 3..6, the middle ones first
    expect(api.calls.length).toBe(2);
    expect(api.calls.map((a) => a / 100).sort()).toEqual([4, 5]);
    api.release();
    await new Promise((r) => setTimeout(r, 5));
    expect(api.calls.length).toBe(4);
    api.release();
    await settle(p);
    for (let i = 350; i <= 650; i++) expect(p.row(i)?.seq).toBe(i + 1);
  });

  it("aborts requests for blocks that left the screen", async () => {
    const api = fakeAPI(1_000_000, true);
    const p = new Pager(api.fetch, 100, 10, 2);
    p.want(100_000, 100_050); // a dragged scrollbar passes...
    p.want(400_000, 400_050); // ...and stops here
    expect(api.aborted()).toBe(1);
    api.release();
    await settle(p);
    expect(p.row(100_000)).toBeUndefined();
    expect(p.row(400_000)?.seq).toBe(400_001);
  });

  it("keeps at most maxBlocks blocks", async () => {
    const api = fakeAPI(3_000);
    const p = new Pager(api.fetch, 100, 3);
    p.want(0, 10);
    await settle(p);
    p.want(2_990, 2_999);
    await settle(p);
    p.want(1_000, 1_100);
    await settle(p);
    p.want(1_500, 1_510);
    await settle(p);
    expect(p.row(0)).toBeUndefined();
    expect(p.row(2_999)).toBeUndefined();
    expect(p.row(1_505)?.seq).toBe(1_506);
  });

  it("refresh reads the rows on screen again and keeps them shown meanwhile; reset forgets all", async () => {
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
    expect(p.row(955)).toBeUndefined();
    await settle(p);
    expect(api.calls.length).toBe(n + 2);
    expect(p.row(955)?.seq).toBe(956);
  });
});
