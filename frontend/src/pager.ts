// Pager turns the API's pages into random access by row index for the
// virtual grid. GET /api/jobs/{id}/items?at=N answers the page that starts
// at row N of the filtered order (the server keeps a position index), so
// any block of blockSize rows is one request away, at any depth: the pager
// asks for the blocks on screen (and a margin) and nothing else, keeps the
// most recently used blocks (an LRU of maxBlocks), runs at most maxFlight
// requests at once, and aborts a request whose block has left the screen
// before it was answered (a scrollbar dragged through a million rows asks
// for blocks faster than any server answers them; only the last position
// matters).

import type { Item, Page } from "./api";

// FetchAt reads the page of pageSize rows that starts at row at.
export type FetchAt = (at: number, pageSize: number, signal: AbortSignal) => Promise<Page>;

export class Pager {
  private blocks = new Map<number, Item[]>();
  // stale blocks are shown until they are read again (refresh).
  private stale = new Set<number>();
  // total is the filter's row count as the server last said (null: not yet).
  private total: number | null = null;
  // lastBlock is the index of the final block once a short page was read.
  private lastBlock: number | null = null;
  private wanted: number[] = [];
  private inFlight = new Map<number, AbortController>();
  private gen = 0;

  error: Error | null = null;
  onChange: () => void = () => {};

  constructor(
    private readonly fetchAt: FetchAt,
    readonly blockSize = 1000,
    readonly maxBlocks = 24,
    readonly maxFlight = 2,
  ) {}

  // row returns the item at index i when its block is loaded.
  row(i: number): Item | undefined {
    const b = this.blocks.get(Math.floor(i / this.blockSize));
    return b?.[i % this.blockSize];
  }

  // knownRows is the number of rows as the server last counted them, else
  // null.
  knownRows(): number | null {
    if (this.total !== null) return this.total;
    if (this.lastBlock === null) return null;
    const b = this.blocks.get(this.lastBlock);
    return b ? this.lastBlock * this.blockSize + b.length : null;
  }

  // pending is the number of requests in flight.
  pending(): number {
    return this.inFlight.size;
  }

  // want asks for rows first..last (inclusive) and loads what is missing;
  // requests for blocks no longer wanted are aborted.
  want(first: number, last: number): void {
    const w: number[] = [];
    if (last >= first) {
      const a = Math.floor(Math.max(0, first) / this.blockSize);
      const b = Math.floor(Math.max(0, last) / this.blockSize);
      // The blocks nearest the middle of the range (on screen) first.
      const mid = Math.floor((Math.max(0, first) + Math.max(0, last)) / 2 / this.blockSize);
      for (let k = a; k <= b; k++) w.push(k);
      w.sort((x, y) => Math.abs(x - mid) - Math.abs(y - mid));
    }
    this.wanted = w;
    this.error = null;
    for (const [k, ctrl] of this.inFlight) {
      if (!w.includes(k)) {
        ctrl.abort();
        this.inFlight.delete(k);
      }
    }
    this.pump();
  }

  // refresh reads the rows on screen again and forgets the others (used
  // while a job runs and rows move). The old rows stay on screen until the
  // new ones arrive, so nothing flickers.
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
    this.total = null;
    this.lastBlock = null;
    this.restart();
  }

  // close stops every request in flight.
  close(): void {
    this.gen++;
    this.wanted = [];
    this.abortAll();
  }

  private abortAll(): void {
    for (const ctrl of this.inFlight.values()) ctrl.abort();
    this.inFlight.clear();
  }

  private restart(): void {
    this.abortAll();
    this.pump();
  }

  // pump starts requests for wanted blocks not loaded (or stale), nearest
  // the screen first, up to maxFlight at once.
  private pump(): void {
    for (const k of this.wanted) {
      if (this.inFlight.size >= this.maxFlight) return;
      if (this.inFlight.has(k)) continue;
      if (this.blocks.has(k) && !this.stale.has(k)) {
        this.touch(k);
        continue;
      }
      if (this.lastBlock !== null && k > this.lastBlock) continue;
      const known = this.knownRows();
      if (known !== null && k * this.blockSize >= known && k > 0) continue;
      void this.load(k);
    }
  }

  private async load(k: number): Promise<void> {
    const ctrl = new AbortController();
    this.inFlight.set(k, ctrl);
    const gen = this.gen;
    try {
      const page = await this.fetchAt(k * this.blockSize, this.blockSize, ctrl.signal);
      if (gen !== this.gen || ctrl.signal.aborted) return;
      this.inFlight.delete(k);
      this.store(k, page);
      this.onChange();
    } catch (e) {
      if (gen !== this.gen || ctrl.signal.aborted || (e as Error).name === "AbortError") return;
      this.inFlight.delete(k);
      this.error = e as Error;
      this.onChange();
      return;
    }
    this.pump();
  }

  private touch(k: number): void {
    const b = this.blocks.get(k);
    if (b) {
      this.blocks.delete(k);
      this.blocks.set(k, b);
    }
  }

  private store(k: number, page: Page): void {
    this.stale.delete(k);
    this.blocks.delete(k);
    this.blocks.set(k, page.items);
    if (typeof page.total === "number") this.total = page.total;
    if (!page.next || page.items.length < this.blockSize) this.lastBlock = k;
    else if (this.lastBlock !== null && this.lastBlock <= k) this.lastBlock = null;
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
