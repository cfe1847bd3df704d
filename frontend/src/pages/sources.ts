// Sources: the watched folders, FTP folders and S3 prefixes that turn
// files into jobs by themselves: status, last look, last error, files ingested,
// and "Scan now" for admins (GET /api/sources, POST .../scan).

import * as api from "../api";
import { h } from "../dom";
import * as fmt from "../format";
import { listPage, type Notice } from "../listpage";
import type { Page } from "../ui";

interface Source {
  name: string;
  kind: string;
  // The kind's settings: they name secrets (variables, files), never hold
  // them.
  config: {
    path?: string;
    recursive?: boolean;
    url?: string;
    bucket?: string;
    prefix?: string;
    endpoint?: string;
  };
  pipeline: string;
  after: string;
  enabled: boolean;
  lastPollAt?: string;
  lastError?: string;
  ingested: number;
  failed: number;
}

interface ScanResult {
  seen?: number;
  ingested?: number;
  failed?: number;
}

// where says where a source's files come from.
export function where(s: Source): string {
  const c = s.config ?? {};
  switch (s.kind) {
    case "folder":
      return (c.path ?? "") + (c.recursive ? " (recursive)" : "");
    case "ftp":
      return c.url ?? "";
    case "s3":
      return `s3://${c.bucket ?? ""}/${c.prefix ?? ""}` + (c.endpoint ? ` at ${c.endpoint}` : "");
  }
  return "";
}

export function sourcesPage(me: api.Me): Page {
  const admin = me.user.role === "admin";

  async function scan(name: string, button: HTMLButtonElement, reload: () => Promise<void>, note: Notice): Promise<void> {
    button.disabled = true;
    try {
      const r = await api.post<ScanResult>(`/api/sources/${encodeURIComponent(name)}/scan`);
      note.info(`${name}: ${fmt.int(r.seen ?? 0)} files seen, ${fmt.int(r.ingested ?? 0)} ingested, ${fmt.int(r.failed ?? 0)} failed.`);
      await reload();
    } catch (e) {
      note.error(e);
    } finally {
      button.disabled = false;
    }
  }

  function row(s: Source, reload: () => Promise<void>, note: Notice): HTMLElement {
    const scanB = h("button", { type: "button", "aria-label": `Scan ${s.name} now` }, "Scan now") as HTMLButtonElement;
    scanB.onclick = () => void scan(s.name, scanB, reload, note);
    return h(
      "tr",
      { "data-source": s.name },
      h("td", null, s.name),
      h("td", null, s.kind),
      h("td", null, where(s)),
      h("td", null, s.pipeline),
      h("td", null, s.after),
      h("td", null, s.enabled ? "on" : "off"),
      h("td", null, fmt.time(s.lastPollAt)),
      h("td", { class: s.lastError ? "error" : "" }, s.lastError ?? ""),
      h("td", { class: "num" }, fmt.int(s.ingested)),
      h("td", { class: "num" }, fmt.int(s.failed)),
      h("td", null, admin ? scanB : ""),
    );
  }

  return listPage<Source>({
    title: "Sources",
    intro: "Folders, FTP folders and S3 prefixes that feed jobs by themselves: every stable CSV or XLSX file that arrives there becomes a job, once.",
    empty: "No sources yet. Add one with: sluice source add folder|ftp|s3 NAME ... --pipeline PIPELINE (see sluice source add --help)",
    cls: "sources",
    head: ["Name", "Kind", "Where", "Pipeline", "After ingest", "Enabled", "Last look", "Last error", "Ingested", "Failed", ""],
    load: async () => (await api.get<{ sources: Source[] }>("/api/sources")).sources,
    row,
  });
}
