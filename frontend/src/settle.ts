// WantGate decides when the grid asks for the rows on screen. While the
// scroll bar's thumb is dragged through a big grid, each frame lands
// screens away from the last: asking for the rows of every frame starts a
// request per frame (each costs the main thread a few milliseconds, and
// the next frame makes it stale: aborted or, worse, answered, parsed and
// dropped). So a jump (a move of more than jumpRows rows since the last
// frame) is asked for only once the position rests for settleMs, or every
// maxWaitMs while it keeps jumping; any other move is asked for at once.

export class WantGate {
  private lastFirst = -1;
  private first = 0;
  private last = -1;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private jumpingSince = -1;

  constructor(
    private readonly want: (first: number, last: number) => void,
    private readonly jumpRows: () => number,
    private readonly now: () => number = () => performance.now(),
    readonly settleMs = 40,
    readonly maxWaitMs = 250,
  ) {}

  // ask is called with the rows wanted at every frame.
  ask(first: number, last: number): void {
    const jump = this.lastFirst >= 0 && Math.abs(first - this.lastFirst) > this.jumpRows();
    this.lastFirst = first;
    this.first = first;
    this.last = last;
    if (!jump) {
      // Settling after a jump: the timer asks for the latest rows.
      if (this.timer === undefined) this.want(first, last);
      return;
    }
    const now = this.now();
    if (this.jumpingSince < 0) this.jumpingSince = now;
    this.stop();
    if (now - this.jumpingSince >= this.maxWaitMs) this.fire();
    else this.timer = setTimeout(() => this.fire(), this.settleMs);
  }

  // close drops a deferred request.
  close(): void {
    this.stop();
  }

  private stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private fire(): void {
    this.timer = undefined;
    this.jumpingSince = -1;
    this.want(this.first, this.last);
  }
}
