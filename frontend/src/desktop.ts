// The desktop window (Wails): the page is the same as in a browser and
// talks to the same /api, which Wails' asset server hands to Go in
// process. Only what a browser cannot do goes through the Go binding
// (window.go.app.Desktop): saving an export where the person chooses.
// Files dropped on the window reach Go as paths and come back here as a
// "sluice:dropped" event.

interface Bridge {
  SaveExport(link: string): Promise<string>;
}

interface WailsWindow {
  go?: { app?: { Desktop?: Bridge } };
  runtime?: { EventsOn(name: string, fn: (...data: unknown[]) => void): () => void };
}

const w = globalThis as unknown as WailsWindow;

// bridge is the Go binding, or null in a browser.
export function bridge(): Bridge | null {
  return w.go?.app?.Desktop ?? null;
}

export function inDesktop(): boolean {
  return bridge() !== null;
}

// DroppedFile is what became of a file dropped on the window (Go's
// app.DroppedFile).
export interface DroppedFile {
  file: string;
  jobId?: number;
  items?: number;
  error?: string;
}

// onDropped calls fn with the outcome of every drop on the window; it
// returns the unsubscribe function (a no-op in a browser).
export function onDropped(fn: (files: DroppedFile[]) => void): () => void {
  if (!w.runtime?.EventsOn) return () => {};
  return w.runtime.EventsOn("sluice:dropped", (files) => fn((files as DroppedFile[]) ?? []));
}

// guardDrops cancels the browser's own handling of files dragged onto the
// page, which is to open the file in place of the app. In the desktop
// window this matters most: WebKitGTK navigates to a file dropped on a
// Wails window (wails issue 3686) while Wails also hands its path to Go.
// Pages that take drops still get the events.
export function guardDrops(target: EventTarget = globalThis): void {
  const cancel = (e: Event) => {
    const dt = (e as DragEvent).dataTransfer;
    if (!dt || dt.types.includes("Files")) e.preventDefault();
  };
  target.addEventListener("dragover", cancel, true);
  target.addEventListener("drop", cancel, true);
}

// flatBody writes a form as multipart/form-data bytes (RFC 7578) and
// returns them with their Content-Type. The desktop window needs it twice
// over: WebKitGTK crashes the app when a request to the app's own scheme
// carries a Blob-backed body, such as a FormData with a File (wails issues
// 5845, 6068), and it cannot read such a form back into bytes either
// (Request.arrayBuffer fails). An ArrayBuffer body passes.
export async function flatBody(fd: FormData): Promise<{ body: ArrayBuffer; type: string }> {
  const rnd = new Uint8Array(12);
  crypto.getRandomValues(rnd);
  const boundary = "----sluice" + Array.from(rnd, (b) => b.toString(16).padStart(2, "0")).join("");
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  for (const [name, v] of fd.entries()) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${quote(name)}"`;
    if (typeof v === "string") {
      parts.push(enc.encode(`${head}\r\n\r\n${v}\r\n`));
      continue;
    }
    head += `; filename="${quote(v.name)}"\r\nContent-Type: ${v.type || "application/octet-stream"}\r\n\r\n`;
    parts.push(enc.encode(head), new Uint8Array(await v.arrayBuffer()), enc.encode("\r\n"));
  }
  parts.push(enc.encode(`--${boundary}--\r\n`));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return { body: out.buffer, type: `multipart/form-data; boundary=${boundary}` };
}

// quote escapes a name inside a quoted header parameter the way browsers
// do for forms (HTML: newlines and double quotes percent-encoded).
function quote(s: string): string {
  return s.replace(/\r/g, "%0D").replace(/\n/g, "%0A").replace(/"/g, "%22");
}
