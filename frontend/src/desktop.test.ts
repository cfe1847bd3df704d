import { describe, expect, it } from "vitest";
import { flatBody, guardDrops } from "./desktop";

describe("flatBody", () => {
  it("writes a form that a multipart reader reads back field for field", async () => {
    const fd = new FormData();
    const csv = "sku,name\nA-1,\"quoted, name\"\nB-2,é\n";
    fd.append("file", new File([csv], 'we"ird\nname.csv', { type: "text/csv" }));
    fd.append("pipeline", "noop");
    const { body, type } = await flatBody(fd);
    expect(body).toBeInstanceOf(ArrayBuffer);
    expect(type).toMatch(/^multipart\/form-data; boundary=----sluice[0-9a-f]{24}$/);
    const back = await new Response(body, { headers: { "Content-Type": type } }).formData();
    expect(back.get("pipeline")).toBe("noop");
    const f = back.get("file") as File;
    expect(f.name).toBe('we"ird\nname.csv'); // the reader undoes the escapes, as for a browser's form
    expect(f.type).toBe("text/csv");
    expect(await f.text()).toBe(csv);
  });

  it("keeps binary file bytes as they are", async () => {
    const bytes = new Uint8Array(256).map((_, i) => i);
    const fd = new FormData();
    fd.append("file", new File([bytes], "b.bin"));
    const { body, type } = await flatBody(fd);
    const f = (await new Response(body, { headers: { "Content-Type": type } }).formData()).get("file") as File;
    expect(new Uint8Array(await f.arrayBuffer())).toEqual(bytes);
  });
});

describe("guardDrops", () => {
  function dragEvent(type: string, types: string[]): Event {
    const e = new Event(type, { cancelable: true });
    Object.defineProperty(e, "dataTransfer", { value: { types } });
    return e;
  }

  it("cancels dragging files over and dropping them, not other drags", () => {
    const target = new EventTarget();
    guardDrops(target);
    for (const type of ["dragover", "drop"]) {
      const files = dragEvent(type, ["Files"]);
      target.dispatchEvent(files);
      expect(files.defaultPrevented, type + " of files").toBe(true);
      const text = dragEvent(type, ["text/plain"]);
      target.dispatchEvent(text);
      expect(text.defaultPrevented, type + " of text").toBe(false);
    }
  });
});
