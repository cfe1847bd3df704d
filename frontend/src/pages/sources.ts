// Sources: the watched folders (and, later, FTP and S3) that turn files
// into jobs by themselves: status, last look, last error, files ingested,
// and "Scan now" for admins (GET /api/sources, POST .../scan).

import * as api from "../api";
import { h } from "../dom";
import * as fmt from "../format";
import { listPage, type Notice } from "../listpage";
import type { Page } from "../ui";

interface Source {
  name: string;
  kind: string;
  config: { path?: string; recursive?: boolean };
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
      h("td", null, s.config?.path ?? ""),
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
    intro: "Folders that feed jobs by themselves: every stable CSV or XLSX file dropped there becomes a job, once.",
    empty: "No sources yet. Add a watched folder with: sluice source add folder NAME --path DIR --pipeline PIPELINE",
    cls: "sources",
    head: ["Name", "Kind", "Path", "Pipeline", "After ingest", "Enabled", "Last look", "Last error", "Ingested", "Failed", ""],
    load: async () => (await api.get<{ sources: Source[] }>("/api/sources")).sources,
    row,
  });
}
