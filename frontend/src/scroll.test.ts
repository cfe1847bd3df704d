import { describe, expect, it } from "vitest";
import { MAX_SCROLL_PX, ScrollModel } from "./scroll";

describe("ScrollModel", () => {
  it("maps one to one below the cap", () => {
    const m = new ScrollModel(32);
    m.rows = 100;
    m.viewport = 320;
    expect(m.spacerHeight()).toBe(3200);
    expect(m.ratio()).toBe(1);
    expect(m.visible(64)).toEqual({ first: 2, last: 11, top: 0 });
    expect(m.visible(70).top).toBe(-6);
  });

  it("reaches the last of a million rows at the bottom of a capped spacer", () => {
    const m = new ScrollModel(32);
    m.rows = 1_000_000;
    m.viewport = 640;
    expect(m.spacerHeight()).toBe(MAX_SCROLL_PX);
    const bottom = m.spacerHeight() - m.viewport;
    const v = m.visible(bottom);
    expect(v.last).toBe(999_999);
    expect(v.first).toBe(1_000_000 - 20);
    expect(m.visible(0).first).toBe(0);
    // The middle of the scrollbar is the middle of the rows.
    expect(Math.abs(m.visible(bottom / 2).first - 500_000)).toBeLessThan(20);
  });

  it("scrolls as little as needed to show a row", () => {
    const m = new ScrollModel(32);
    m.rows = 10_000_000;
    m.viewport = 320;
    const st = m.scrollTopToShow(5_000_000, 0);
    const v = m.visible(st);
    expect(v.first).toBeLessThanOrEqual(5_000_000);
    expect(v.last).toBeGreaterThanOrEqual(5_000_000);
    expect(m.scrollTopToShow(v.first + 2, st)).toBe(st);
  });

  it("handles no rows", () => {
    const m = new ScrollModel(32);
    m.viewport = 300;
    expect(m.visible(0)).toEqual({ first: 0, last: -1, top: 0 });
  });
});
