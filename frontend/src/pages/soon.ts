import { h } from "../dom";
import { link, type Page } from "../ui";

// soonPage answers unknown addresses.
export function soonPage(): Page {
  return {
    title: "Not found",
    el: h("section", { class: "page" }, h("h1", null, "Nothing here"), h("p", null, "This address is not a page of Sluice. ", link("/", "Go to jobs"))),
  };
}
