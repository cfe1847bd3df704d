// A list page: the shape of the Sources, Commands, Triggers and Workers
// screens.

import { h, replace } from "./dom";
import { notice, type Page } from "./ui";

// Notice is the message line of a page.
export type Notice = ReturnType<typeof notice>;

// listPage is a page of one table that reloads every 5 s: a title, a line
// of introduction, a notice for errors and messages, and a text shown when
// the list is empty. row builds a row; reload and note let its buttons act.
export function listPage<T>(opts: {
  title: string;
  intro: string;
  empty: string;
  cls: string;
  head: string[];
  load: () => Promise<T[]>;
  row: (v: T, reload: () => Promise<void>, note: Notice) => HTMLElement;
}): Page {
  const note = notice();
  const tbody = h("tbody");
  const empty = h("p", { class: "muted", hidden: true }, opts.empty);
  let timer = 0;
  let stopped = false;
  async function load(): Promise<void> {
    try {
      const list = await opts.load();
      if (stopped) return;
      replace(tbody, ...list.map((v) => opts.row(v, load, note)));
      empty.hidden = list.length > 0;
    } catch (e) {
      note.error(e);
    }
  }
  async function poll(): Promise<void> {
    await load();
    if (!stopped) timer = window.setTimeout(poll, 5000);
  }
  void poll();
  return {
    title: opts.title,
    el: h(
      "section",
      { class: "page" },
      h("h1", null, opts.title),
      h("p", { class: "muted" }, opts.intro),
      note.el,
      h("table", { class: opts.cls }, h("thead", null, h("tr", null, ...opts.head.map((t) => h("th", { scope: "col" }, t)))), tbody),
      empty,
    ),
    destroy() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
