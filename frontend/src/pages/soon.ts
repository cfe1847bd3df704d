import { h } from "../dom";
import { link, type Page } from "../ui";

// soonPage holds the places of screens that come with their own issues
// (Sources, Triggers) and answers unknown addresses.
export function soonPage(what: string): Page {
  if (what === "sources" || what === "triggers") {
    const title = what === "sources" ? "Sources" : "Triggers";
    return {
      title,
      el: h(
        "section",
        { class: "page" },
        h("h1", null, title),
        h(
          "p",
          null,
          what === "sources"
            ? "Folders, FTP and S3 buckets that feed jobs by themselves are not built yet."
            : "Schedules and events that start jobs are not built yet.",
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
