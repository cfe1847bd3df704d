// A few helpers to build DOM without a framework.

export type Child = Node | string | number | null | undefined | false;
export type Attrs = Record<string, unknown>;

// h creates an element. Attributes: "class", "on<event>" (a listener),
// "style" (a string), properties that are not attributes ("value",
// "checked", "disabled", "hidden", "selected"), and anything else as an
// attribute (null/false leaves it out, true sets it empty).
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...kids: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) setAttrs(el, attrs);
  append(el, kids);
  return el;
}

const props = new Set(["value", "checked", "disabled", "hidden", "selected", "indeterminate"]);

export function setAttrs(el: HTMLElement, attrs: Attrs): void {
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v as EventListener);
    } else if (props.has(k)) {
      (el as unknown as Record<string, unknown>)[k] = v;
    } else if (v === null || v === undefined || v === false) {
      el.removeAttribute(k);
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
}

export function append(el: Node, kids: Child[]): void {
  for (const k of kids) {
    if (k === null || k === undefined || k === false) continue;
    el.appendChild(typeof k === "object" ? k : document.createTextNode(String(k)));
  }
}

// replace empties el and fills it with kids.
export function replace(el: Node, ...kids: Child[]): void {
  while (el.firstChild) el.removeChild(el.firstChild);
  append(el, kids);
}

// svg creates an SVG element.
export function svg(tag: string, attrs: Record<string, string | number> = {}, ...kids: Node[]): SVGElement {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const k of kids) el.appendChild(k);
  return el;
}
