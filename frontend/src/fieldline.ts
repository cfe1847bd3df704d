// lineOfField finds the line (0-based) of a YAML or JSON document where a
// field path such as "stages[1].config.url" is written, so a validation
// error can be shown at its place; -1 when it cannot tell.

export function parseField(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of path.split(".")) {
    const m = part.match(/^([^[\]]*)((?:\[\d+\])*)$/);
    if (!m) return [];
    if (m[1]) out.push(m[1]);
    for (const idx of m[2].matchAll(/\[(\d+)\]/g)) out.push(Number(idx[1]));
  }
  return out;
}

export function lineOfField(text: string, path: string): number {
  const segs = parseField(path);
  if (!segs.length) return -1;
  const lines = text.split("\n");
  // found is the line of the last segment found; from is where the next
  // search starts (inclusive: "- processor:" opens an element and holds
  // its first key on one line).
  let found = -1;
  let from = 0;
  for (const s of segs) {
    if (typeof s === "number") {
      const el = elementLine(lines, found + 1, s);
      if (el < 0) return found;
      found = el;
      from = el;
      continue;
    }
    const key = new RegExp(`^\\s*(?:- )?"?${escape(s)}"?\\s*:`);
    let hit = -1;
    for (let i = from; i < lines.length; i++) {
      if (key.test(lines[i])) {
        hit = i;
        break;
      }
    }
    if (hit < 0) return found;
    found = hit;
    from = hit + 1;
  }
  return found;
}

// elementLine finds the line that opens element n of an array whose
// elements start at or after line start: lines at the indentation of the
// first element that begin with "- " (YAML) or "{" / "[" / a value (JSON).
function elementLine(lines: string[], start: number, n: number): number {
  let indent = -1;
  let count = -1;
  for (let i = start; i < lines.length; i++) {
    const t = lines[i];
    if (!t.trim()) continue;
    const ind = t.length - t.trimStart().length;
    if (indent < 0) indent = ind;
    if (ind < indent) return -1;
    if (ind === indent && /^\s*(- |-$|\{|\[|"|\d|true|false|null)/.test(t)) {
      if (++count === n) return i;
    }
  }
  return -1;
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
