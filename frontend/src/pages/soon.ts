import { h } from "../dom";
import { link, type Page } from "../ui";

// soonPage holds the place of a screen that comes with its own issue
// (Triggers) and answers unknown addresses.
export function soonPage(what: string): Page {
  if (what === "triggers") {
    const title = "Triggers";
    return {
      title,
      el: h(
        "section",
        { class: "page" },
        h("h1", null, title),
        h(
          "p",
          null,
          "Schedules and events that start jobs are not built yet.",
        ),
        h("p", null, link("/", "Back to jobs")),
      ),
    };
  }
  return {
    title: "Not found",
    el: h("section", { class: "page" }, h("h1", null, "Nothing here"), h("p", null, "This address is not a page of Sluice. ", link("/", "Go to jobs"))),
  };
}
