// The client of Sluice's HTTP API (app/api, described by /api/openapi.json).
// A browser session authenticates with its HttpOnly cookie; writes carry
// the X-CSRF-Token that /api/me returns. In the desktop window the same
// calls reach Go in process, as the local user (desktop.ts).

import { bridge, flatBody, inDesktop } from "./desktop";

export const STATUSES = ["PENDING", "PROCESSING", "DONE", "ERROR", "NOT_FOUND", "SKIPPED"] as const;
export type Status = (typeof STATUSES)[number];
export type Counts = Record<Status, number>;

export const TERMINAL_STATES = ["DONE", "FAILED", "CANCELED"];

export interface User {
  id: number;
  name: string;
  role: string;
  hasPassword: boolean;
}

export interface Job {
  id: number;
  userId: number;
  pipeline: string;
  name: string;
  source: string;
  state: string;
  priority: number;
  totalItems: number;
  counts: Counts;
  requests: number;
  requestCap?: number;
  lastError?: string;
  createdAt: string;
  updatedAt: string;
  startedAt?: string;
  finishedAt?: string;
  processed: number;
  failed: number;
  percent: number;
  itemsPerSec: number;
  etaSeconds: number | null;
}

export interface Column {
  key: string;
  label: string;
}

export interface Item {
  id: number;
  jobId: number;
  seq: number;
  stage: number;
  status: Status;
  attempts: number;
  result: Record<string, unknown> | null;
  inputSummary: string;
  lastError?: string;
  lastErrorCode?: string;
  runAt: string;
  updatedAt: string;
}

export interface Page {
  items: Item[];
  next: string | null;
  // at and total answer a page asked for by position: the row it starts
  // at and the filter's row count (when the server knows it already).
  at?: number;
  total?: number;
}

export interface Attempt {
  attempt: number;
  stage: number;
  worker: string;
  startedAt: string;
  finishedAt?: string;
  outcome: string;
  errorClass?: string;
  errorCode?: string;
  error?: string;
  durationNs: number;
  detail?: unknown;
}

export interface ItemDetail {
  id: number;
  jobId: number;
  pipeline: string;
  seq: number;
  stage: number;
  status: Status;
  attempts: number;
  input: unknown;
  normalized: unknown;
  result: unknown;
  lastError?: string;
  lastErrorCode?: string;
  updatedAt: string;
  attemptHistory: Attempt[];
}

export interface Pipeline {
  name: string;
  version: number;
  description?: string;
  stages: unknown[];
  updatedAt?: string;
  [k: string]: unknown;
}

export interface HostState {
  host: string;
  rate: number;
  ceiling?: number;
  concurrency: number;
  inFlight: number;
  pausedUntil?: string;
  ok: number;
  rateLimited: number;
  errors: number;
}

export interface Stats {
  at: string;
  queue: { due: number; later: number; processing: number; ingesting: number; nextRunAt?: string };
  runner?: {
    claimed: number;
    completed: number;
    byStatus: Record<string, number>;
    byClass: Record<string, number>;
    retried: number;
    itemsPerSec: number;
  };
  claim?: { size: number; avgItemMs: number; concurrency: number; pressure: number };
  hosts: HostState[];
  lastIngest?: { jobId: number; rows: number; batches: number; finalBatch: number; ms: number; at: string };
  series?: StatsSeries;
}

// Point is one sample of a StatsSeries line.
export interface Point {
  t: string;
  v: number;
}

// StatsSeries is what the server sampled once a second (GET
// /api/stats?series=1[&since=T]); a line it cannot sample is absent.
export interface StatsSeries {
  everyMs: number;
  capacity: number;
  claimSize?: Point[];
  avgItemMs?: Point[];
  leaseMs?: Point[];
  itemsPerSec?: Point[];
  queueDue?: Point[];
  queueLater?: Point[];
  queueProcessing?: Point[];
  ingestBatchRows?: Point[];
  errorsPerSec?: Record<string, Point[]>;
  hosts: Record<string, { rate: Point[]; concurrency: Point[] }>;
}

// ApiError is an answer other than 2xx: the API's {"error":{...}} message.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

let csrf = "";
let onSignedOut: () => void = () => {};

export function setSignedOutHandler(fn: () => void): void {
  onSignedOut = fn;
}

export function setCSRF(token: string): void {
  csrf = token;
}

// errorFrom turns an answer into an ApiError with the API's message.
export async function errorFrom(res: Response): Promise<ApiError> {
  let code = "http_" + res.status;
  let message = `${res.status} ${res.statusText || "error"}`;
  let field: string | undefined;
  try {
    const body = await res.json();
    if (body && body.error) {
      code = body.error.code ?? code;
      message = body.error.message ?? message;
      field = body.error.field || undefined;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(res.status, code, message, field);
}

export interface CallOptions {
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  // quiet401 does not treat 401 as "signed out" (the login call).
  quiet401?: boolean;
}

// call sends one request and decodes the JSON answer (undefined for 204).
// early holds answers asked for before they are needed: a cold load asks
// for its page's first data beside /api/me, not after it. Each is used
// once, by the first GET of the same path, or dropped after earlyFor ms.
const early = new Map<string, Promise<Response>>();
const earlyFor = 10_000;

// prefetch asks for GET path now, for a call() soon (once: a path
// already asked for and not yet used is not asked for again).
export function prefetch(path: string): void {
  if (early.has(path)) return;
  const res = fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  res.catch(() => {}); // a failure is the later call's to report
  early.set(path, res);
  setTimeout(() => early.get(path) === res && early.delete(path), earlyFor);
}

export async function call<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  let body: BodyInit | undefined;
  if (opts.body instanceof FormData || typeof opts.body === "string") {
    body = opts.body;
    if (opts.contentType) headers["Content-Type"] = opts.contentType;
  } else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["Content-Type"] = "application/json";
  }
  if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
  let res: Response;
  const pre = method === "GET" ? early.get(path) : undefined;
  early.delete(path);
  try {
    res = await (pre ?? fetch(path, { method, headers, body, signal: opts.signal, credentials: "same-origin" }));
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw new ApiError(0, "network", "the server did not answer (is sluice --serve running?)");
  }
  if (!res.ok) {
    const err = await errorFrom(res);
    if (res.status === 401 && !opts.quiet401) onSignedOut();
    throw err;
  }
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

export const get = <T>(path: string, signal?: AbortSignal) => call<T>("GET", path, { signal });
export const post = <T>(path: string, body?: unknown) => call<T>("POST", path, { body: body ?? {} });

export interface Me {
  user: User;
  csrfToken?: string;
  via: string;
}

export async function me(): Promise<Me> {
  const m = await call<Me>("GET", "/api/me", { quiet401: true });
  setCSRF(m.csrfToken ?? "");
  return m;
}

export async function login(name: string, password: string): Promise<Me> {
  const m = await call<Me>("POST", "/api/login", { body: { name, password }, quiet401: true });
  setCSRF(m.csrfToken ?? "");
  return m;
}

// itemsPath is a page of a job's items after a cursor, or (at) starting
// at a row.
export function itemsPath(jobId: number, statuses: readonly string[], pageSize: number, from: { after?: string | null; at?: number }): string {
  const q = new URLSearchParams();
  if (statuses.length) q.set("statuses", statuses.join(","));
  q.set("pageSize", String(pageSize));
  if (from.after) q.set("after", from.after);
  if (from.at !== undefined) q.set("at", String(from.at));
  return `/api/jobs/${jobId}/items?${q}`;
}

export function exportPath(jobId: number, format: "csv" | "xlsx", statuses: readonly string[]): string {
  const q = new URLSearchParams({ format });
  if (statuses.length) q.set("statuses", statuses.join(","));
  return `/api/jobs/${jobId}/export?${q}`;
}

// download fetches a file and hands it to the browser as a download
// named as the server's Content-Disposition says.
// In the desktop window the Save dialog asks where, and Go writes the file;
// the answer is then the path written ("" when cancelled).
export async function download(path: string, signal: AbortSignal, onBytes: (n: number) => void): Promise<string | void> {
  const desktop = bridge();
  if (desktop) return desktop.SaveExport(path);
  let res: Response;
  try {
    res = await fetch(path, { credentials: "same-origin", signal });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw new ApiError(0, "network", "the server did not answer (is sluice --serve running?)");
  }
  if (!res.ok) {
    const err = await errorFrom(res);
    if (res.status === 401) onSignedOut();
    throw err;
  }
  const parts: BlobPart[] = [];
  let n = 0;
  if (res.body) {
    const reader = res.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      n += value.length;
      onBytes(n);
    }
  }
  const name = /filename="([^"]+)"/.exec(res.headers.get("Content-Disposition") ?? "")?.[1] ?? "export";
  const url = URL.createObjectURL(new Blob(parts, { type: res.headers.get("Content-Type") ?? "application/octet-stream" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// upload creates a job from a file, reporting the bytes sent (XHR: fetch
// cannot report upload progress).
export function upload(
  file: File,
  pipeline: string,
  onProgress: (sent: number, total: number) => void,
): Promise<{ jobId: number }> {
  return new Promise((resolve, reject) => {
    const fd = new FormData();
    fd.append("file", file, file.name);
    if (pipeline) fd.append("pipeline", pipeline);
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/jobs");
    xhr.setRequestHeader("X-CSRF-Token", csrf);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.total);
    xhr.onerror = () => reject(new ApiError(0, "network", "the upload did not reach the server"));
    xhr.onload = () => {
      let body: { jobId?: number; error?: { code?: string; message?: string; field?: string } } = {};
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // keep {}
      }
      if (xhr.status >= 200 && xhr.status < 300 && body.jobId) {
        resolve({ jobId: body.jobId });
      } else {
        if (xhr.status === 401) onSignedOut();
        const e = body.error ?? {};
        reject(new ApiError(xhr.status, e.code ?? "http_" + xhr.status, e.message ?? `upload failed (${xhr.status})`, e.field));
      }
    };
    if (inDesktop()) {
      // The desktop window cannot send a File's body as is (desktop.ts).
      flatBody(fd).then(({ body, type }) => {
        xhr.setRequestHeader("Content-Type", type);
        xhr.send(body);
      }, reject);
    } else {
      xhr.send(fd);
    }
  });
}

// Live job updates: one EventSource for the page, shared by every screen.
type JobListener = (j: Job) => void;
type GoneListener = (id: number) => void;
const jobListeners = new Set<JobListener>();
const goneListeners = new Set<GoneListener>();
const statusListeners = new Set<(live: boolean) => void>();
let source: EventSource | null = null;

export function startEvents(): void {
  if (source) return;
  source = new EventSource("/api/events");
  source.addEventListener("job", (e) => {
    const j = JSON.parse((e as MessageEvent).data) as Job;
    for (const l of jobListeners) l(j);
  });
  source.addEventListener("job.deleted", (e) => {
    const { id } = JSON.parse((e as MessageEvent).data) as { id: number };
    for (const l of goneListeners) l(id);
  });
  source.onopen = () => statusListeners.forEach((l) => l(true));
  source.onerror = () => statusListeners.forEach((l) => l(false));
}

export function stopEvents(): void {
  source?.close();
  source = null;
}

// onJob subscribes to job events; it returns the unsubscribe function.
export function onJob(fn: JobListener, gone?: GoneListener): () => void {
  jobListeners.add(fn);
  if (gone) goneListeners.add(gone);
  return () => {
    jobListeners.delete(fn);
    if (gone) goneListeners.delete(gone);
  };
}

export function onLive(fn: (live: boolean) => void): () => void {
  statusListeners.add(fn);
  return () => statusListeners.delete(fn);
}
