import { describe, expect, it } from "vitest";
import { deepField, lineOfField, parseField } from "./fieldline";

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

describe("deepField", () => {
  it("follows the message's field names", () => {
    expect(deepField("stages[0]", 'stages[0]: processor: unknown kind "nope" (one of http, image, noop)')).toBe("stages[0].processor");
    expect(deepField("stages", "stages: a pipeline needs at least one stage")).toBe("stages");
    expect(deepField("", "whatever")).toBe("");
  });
  it("finds the refined field's line", () => {
    const f = deepField("stages[1]", "stages[1]: config: http: json: cannot unmarshal");
    expect(lineOfField(json, f)).toBe(8);
  });
});
