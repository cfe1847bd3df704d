import { describe, expect, it } from "vitest";
import { lineOfField, parseField } from "./fieldline";

const json = `{
  "name": "shop",
  "stages": [
    {
      "processor": "noop"
    },
    {
      "processor": "http",
      "config": {
        "url": "x"
      }
    }
  ]
}`;

const yaml = `name: shop
stages:
  - processor: noop
  - processor: http
    config:
      url: x
`;

describe("lineOfField", () => {
  it("parses paths", () => {
    expect(parseField("stages[1].config.url")).toEqual(["stages", 1, "config", "url"]);
  });
  it("finds fields in JSON", () => {
    expect(lineOfField(json, "name")).toBe(1);
    expect(lineOfField(json, "stages[1].processor")).toBe(7);
    expect(lineOfField(json, "stages[1].config.url")).toBe(9);
  });
  it("finds fields in YAML", () => {
    expect(lineOfField(yaml, "stages[0].processor")).toBe(2);
    expect(lineOfField(yaml, "stages[1].processor")).toBe(3);
    expect(lineOfField(yaml, "stages[1].config.url")).toBe(5);
  });
  it("falls back to the nearest parent", () => {
    expect(lineOfField(json, "stages[1].missing")).toBe(6);
    expect(lineOfField(json, "")).toBe(-1);
  });
});

describe("structured fields", () => {
  it("finds a processor's config field under its stage", () => {
    // The API's error.field is the whole path (the engine carries it).
    expect(lineOfField(json, "stages[1].config")).toBe(8);
  });
});
