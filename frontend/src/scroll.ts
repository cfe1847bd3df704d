// The grid's scaled scroll model. A browser caps an element's height
// (Chrome near 33.5 million px, Firefox near 17.9 million), so a grid of a
// million 32 px rows cannot be one tall element. The scroller instead holds
// a spacer of at most maxPx; its scroll position maps linearly onto the
// virtual content (rows × rowHeight), so the top of the scrollbar is row 1
// and its bottom is the last row, however many rows there are. Below the
// cap the mapping is one to one.

// MAX_SCROLL_PX is far below every browser's limit. Scrolling with the
// wheel or the keyboard moves through the virtual content pixel by pixel
// whatever the scale (see Grid), so a low cap costs only the precision of
// dragging the scrollbar's thumb, which is coarse at this size anyway.
export const MAX_SCROLL_PX = 1_000_000;

export interface Visible {
  // first is the index of the first row on screen (maybe partly).
  first: number;
  // last is the index of the last row on screen (inclusive), or first-1
  // when there are no rows.
  last: number;
  // top is where the first row's top edge is, in px from the top of the
  // rows' viewport (zero or negative).
  top: number;
}

export class ScrollModel {
  rows = 0;
  viewport = 0;

  constructor(
    readonly rowHeight: number,
    readonly maxPx = MAX_SCROLL_PX,
  ) {}

  // contentHeight is the height all rows would have.
  contentHeight(): number {
    return this.rows * this.rowHeight;
  }

  // spacerHeight is the height of the element that makes the scrollbar.
  spacerHeight(): number {
    return Math.min(this.contentHeight(), this.maxPx);
  }

  // ratio is virtual pixels per scrolled pixel (1 below the cap).
  ratio(): number {
    const H = this.contentHeight();
    const S = this.spacerHeight();
    if (S <= this.viewport || H <= S) return 1;
    return (H - this.viewport) / (S - this.viewport);
  }

  maxVirtualTop(): number {
    return Math.max(0, this.contentHeight() - this.viewport);
  }

  // virtualTop is the content offset shown at scroll position scrollTop.
  virtualTop(scrollTop: number): number {
    // The bottom of the scrollbar is the end, rounding aside.
    if (this.ratio() > 1 && scrollTop >= this.spacerHeight() - this.viewport - 0.5) return this.maxVirtualTop();
    return clamp(scrollTop * this.ratio(), 0, this.maxVirtualTop());
  }

  // scrollTopFor is the scroll position that shows content offset v.
  scrollTopFor(v: number): number {
    return clamp(v, 0, this.maxVirtualTop()) / this.ratio();
  }

  visible(scrollTop: number): Visible {
    return this.visibleAt(this.virtualTop(scrollTop));
  }

  // clampTop keeps a content offset within the content.
  clampTop(v: number): number {
    return clamp(v, 0, this.maxVirtualTop());
  }

  // visibleAt is what shows at content offset v.
  visibleAt(v: number): Visible {
    v = this.clampTop(v);
    if (this.rows === 0) return { first: 0, last: -1, top: 0 };
    const first = Math.min(this.rows - 1, Math.floor(v / this.rowHeight));
    const last = Math.min(this.rows - 1, Math.floor((v + Math.max(this.viewport, 1) - 1) / this.rowHeight));
    return { first, last, top: first * this.rowHeight - v };
  }

  // scrollTopToShow returns the scroll position that brings row fully into
  // view while moving as little as possible from scrollTop.
  scrollTopToShow(row: number, scrollTop: number): number {
    const v = this.virtualTop(scrollTop);
    const to = this.topToShow(row, v);
    return to === v ? scrollTop : this.scrollTopFor(to);
  }

  // topToShow is the content offset nearest to v that shows row fully.
  topToShow(row: number, v: number): number {
    const rowTop = row * this.rowHeight;
    const rowBottom = rowTop + this.rowHeight;
    if (rowTop < v) return this.clampTop(rowTop);
    if (rowBottom > v + this.viewport) return this.clampTop(rowBottom - this.viewport);
    return v;
  }

  // rowsPerPage is how many whole rows fit on screen (at least 1).
  rowsPerPage(): number {
    return Math.max(1, Math.floor(this.viewport / this.rowHeight));
  }
}

function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}
