import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WantGate } from "./settle";

describe("WantGate", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function gate() {
    const asked: [number, number][] = [];
    const g = new WantGate((a, b) => asked.push([a, b]), () => 100, () => Date.now(), 40, 250);
    return { g, asked };
  }

  it("asks at once for small moves (wheel, keys)", () => {
    const { g, asked } = gate();
    g.ask(0, 30);
    g.ask(10, 40);
    g.ask(110, 140);
    expect(asked).toEqual([
      [0, 30],
      [10, 40],
      [110, 140],
    ]);
  });

  it("asks for a jump only once the position rests, for the last position", () => {
    const { g, asked } = gate();
    g.ask(0, 30);
    for (let k = 1; k <= 5; k++) {
      vi.advanceTimersByTime(16);
      g.ask(k * 5000, k * 5000 + 30);
    }
    expect(asked).toEqual([[0, 30]]);
    vi.advanceTimersByTime(39);
    expect(asked).toEqual([[0, 30]]);
    vi.advanceTimersByTime(1);
    expect(asked).toEqual([
      [0, 30],
      [25000, 25030],
    ]);
    // Settled: small moves are asked for at once again.
    g.ask(25010, 25040);
    expect(asked.at(-1)).toEqual([25010, 25040]);
  });

  it("a small move while settling waits for the timer, which asks for the latest rows", () => {
    const { g, asked } = gate();
    g.ask(0, 30);
    g.ask(9000, 9030);
    g.ask(9005, 9035);
    expect(asked).toEqual([[0, 30]]);
    vi.advanceTimersByTime(40);
    expect(asked).toEqual([
      [0, 30],
      [9005, 9035],
    ]);
  });

  it("asks at least every maxWaitMs while the jumps go on", () => {
    const { g, asked } = gate();
    g.ask(0, 30);
    for (let k = 1; k <= 40; k++) {
      vi.advanceTimersByTime(16);
      g.ask(k * 1000, k * 1000 + 30);
    }
    // 640 ms of jumps every 16 ms: two asks on the way (at 250 ms and
    // 500 ms after the first jump), none from the settle timer.
    expect(asked.length).toBe(3);
    vi.advanceTimersByTime(40);
    expect(asked.at(-1)).toEqual([40000, 40030]);
  });

  it("close drops the deferred ask", () => {
    const { g, asked } = gate();
    g.ask(0, 30);
    g.ask(9000, 9030);
    g.close();
    vi.advanceTimersByTime(1000);
    expect(asked).toEqual([[0, 30]]);
  });
});
