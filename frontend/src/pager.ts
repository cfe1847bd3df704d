// Pager turns the API's keyset pages into random access by row index for
// the virtual grid. GET /api/jobs/{id}/items answers one page after an
// opaque cursor and gives the cursor of the next, so row N can be reached
// only through the pages before it: the pager remembers the cursor at the
// start of every block of blockSize rows it has passed, keeps the rows of
// the most recently used blocks (an LRU of maxBlocks), and, to reach a
// block whose cursor it does not know yet, walks the pages from the
// nearest known cursor (keeping only their cursors and, within the LRU,
// their rows). Scrolling back is then one request per block, and a block
// already passed never needs a walk again.

import type { Item, Page } from "./api";

export type FetchPage = (after: string | null, pageSize: number, signal: AbortSignal) => Promise<Page>;

export interface WalkProgress {
  // at is the block being fetched; target is the block wanted.
  at: number;
  target: number;
}

export class Pager {
  // cursors[k] is the cursor that starts block k (null for block 0);
  // undefined when not known yet.
  private cursors: (string | null | undefined)[] = [null];
  private blocks = new Map<number, Item[]>();
  // stale blocks are shown until they are read again (refresh).
  private stale = new Set<number>();
  // lastBlock is the index of the final block once a page said "no next".
  private lastBlock: number | null = null;
  private wanted: number[] = [];
  private running = false;
  private ctrl = new AbortController();
  private gen = 0;

  walk: WalkProgress | null = null;
  error: Error | null = null;
  onChange: () => void = () => {};

  constructor(
    private readonly fetchPage: FetchPage,
    readonly blockSize = 1000,
    readonly maxBlocks = 24,
  ) {}

  // row returns the item at index i when its block is loaded.
  row(i: number): Item | undefined {
    const b = this.blocks.get(Math.floor(i / this.blockSize));
    return b?.[i % this.blockSize];
  }

  // knownRows is the number of rows once the end has been reached, else null.
  knownRows(): number | null {
    if (this.lastBlock === null) return null;
    const b = this.blocks.get(this.lastBlock);
    return b ? this.lastBlock * this.blockSize + b.length : null;
  }

  // furthestCursor is the highest block whose start is known.
  furthestCursor(): number {
    return this.cursors.length - 1;
  }

  // want asks for rows first..last (inclusive) and loads what is missing.
  want(first: number, last: number): void {
    if (last < first) {
      this.wanted = [];
      return;
    }
    const a = Math.floor(Math.max(0, first) / this.blockSize);
    const b = Math.floor(Math.max(0, last) / this.blockSize);
    const w: number[] = [];
    for (let k = a; k <= b; k++) w.push(k);
    this.wanted = w;
    this.error = null;
    void this.pump();
  }

  // refresh reads the rows on screen again and forgets the others, keeping
  // the cursors (used while a job runs and rows move). The old rows stay on
  // screen until the new ones arrive, so nothing flickers.
  refresh(): void {
    this.gen++;
    for (const k of [...this.blocks.keys()]) {
      if (this.wanted.includes(k)) this.stale.add(k);
      else this.blocks.delete(k);
    }
    this.lastBlock = null;
    this.restart();
  }

  // reset forgets everything (a new filter).
  reset(): void {
    this.gen++;
    this.blocks.clear();
    this.stale.clear();
    this.cursors = [null];
    this.lastBlock = null;
    this.walk = null;
    this.restart();
  }

  // close stops any request in flight.
  close(): void {
    this.gen++;
    this.wanted = [];
    this.ctrl.abort();
  }

  private restart(): void {
    this.ctrl.abort();
    this.ctrl = new AbortController();
    this.running = false;
    if (this.wanted.length) void this.pump();
  }

  // next picks the block to fetch now: the first wanted block not loaded,
  // or the block to walk through on the way to it.
  private next(): { fetch: number; target: number } | null {
    for (const k of this.wanted) {
      if (this.blocks.has(k) && !this.stale.has(k)) {
        this.touch(k);
        continue;
      }
      if (this.lastBlock !== null && k > this.lastBlock) continue;
      if (this.cursors[k] !== undefined) return { fetch: k, target: k };
      return { fetch: this.furthestCursor(), target: k };
    }
    return null;
  }

  private touch(k: number): void {
    const b = this.blocks.get(k);
    if (b) {
      this.blocks.delete(k);
      this.blocks.set(k, b);
    }
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const gen = this.gen;
    const signal = this.ctrl.signal;
    try {
      for (;;) {
        const step = this.next();
        if (!step) break;
        this.walk = step.fetch === step.target ? null : { at: step.fetch, target: step.target };
        const page = await this.fetchPage(this.cursors[step.fetch] ?? null, this.blockSize, signal);
        if (gen !== this.gen) return;
        this.store(step.fetch, page);
        this.onChange();
      }
      this.walk = null;
    } catch (e) {
      if (gen !== this.gen || (e as Error).name === "AbortError") return;
      this.error = e as Error;
      this.walk = null;
      this.onChange();
    } finally {
      if (gen === this.gen) this.running = false;
    }
  }

  private store(k: number, page: Page): void {
    this.stale.delete(k);
    this.blocks.delete(k);
    this.blocks.set(k, page.items);
    if (page.next && page.items.length === this.blockSize) {
      if (this.cursors.length === k + 1) this.cursors.push(page.next);
      else this.cursors[k + 1] = page.next;
    } else {
      this.lastBlock = k;
      this.cursors.length = k + 1;
    }
    while (this.blocks.size > this.maxBlocks) {
      const oldest = this.blocks.keys().next().value as number;
      if (this.wanted.includes(oldest)) {
        this.touch(oldest);
        if (this.blocks.size <= this.wanted.length) break;
        continue;
      }
      this.blocks.delete(oldest);
      this.stale.delete(oldest);
    }
  }
}
