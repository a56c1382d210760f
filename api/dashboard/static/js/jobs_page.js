// The jobs table: filter by status and name, sort, page through, refreshed by polling.

import { get } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { STATUSES, duration, percent, statusClass, time } from "./format.js";

const PAGE_SIZES = [10, 25, 50, 100];
const COLUMNS = ["Name", "Status", "Stage", "Progress", "ETA", "Model", "Technique", "Created", "Started", "Ended", "Failure reason"];
const NAME_INPUT_DELAY_MS = 300;

export class JobsPage {
  constructor(root, { refreshNow }) {
    this.refreshNow = refreshNow;
    this.filters = { status: "", name: "", sortBy: "CreationTime", sortOrder: "Descending", pageSize: 25 };
    this.tokens = [null]; // NextToken of each page seen so far; [i] fetches page i
    this.pageIndex = 0;
    this.loaded = false;
    this.nameTimer = null;
    this.body = h("tbody", { id: "jobs-body" });
    this.state = h("p", { class: "state", id: "jobs-state" }, "Loading jobs…");
    this.pageLabel = h("span", { id: "page-label" });
    this.previous = h("button", { type: "button", id: "previous-page", onclick: () => this.turn(-1) }, "‹ Previous");
    this.next = h("button", { type: "button", id: "next-page", onclick: () => this.turn(1) }, "Next ›");
    replaceChildren(
      root,
      h("h1", {}, "Optimization jobs"),
      this.controls(),
      h("table", { class: "jobs", id: "jobs-table" }, h("thead", {}, h("tr", {}, COLUMNS.map((c) => h("th", {}, c)))), this.body),
      this.state,
      h("nav", { class: "pager" }, this.previous, this.pageLabel, this.next),
    );
  }

  controls() {
    const status = h(
      "select",
      { id: "status-filter", onchange: (e) => this.change({ status: e.target.value }) },
      h("option", { value: "" }, "All statuses"),
      STATUSES.map((s) => h("option", { value: s }, s)),
    );
    const name = h("input", {
      id: "name-filter",
      type: "search",
      placeholder: "Name contains…",
      oninput: (e) => {
        clearTimeout(this.nameTimer);
        this.nameTimer = setTimeout(() => this.change({ name: e.target.value.trim() }), NAME_INPUT_DELAY_MS);
      },
    });
    const sortBy = h(
      "select",
      { id: "sort-by", onchange: (e) => this.change({ sortBy: e.target.value }) },
      ["CreationTime", "Name", "Status"].map((key) => h("option", { value: key }, `Sort by ${key}`)),
    );
    const order = h(
      "select",
      { id: "sort-order", onchange: (e) => this.change({ sortOrder: e.target.value }) },
      h("option", { value: "Descending" }, "Descending"),
      h("option", { value: "Ascending" }, "Ascending"),
    );
    const size = h(
      "select",
      { id: "page-size", onchange: (e) => this.change({ pageSize: Number(e.target.value) }) },
      PAGE_SIZES.map((n) => h("option", { value: n, selected: n === this.filters.pageSize }, `${n} per page`)),
    );
    return h("div", { class: "controls" }, status, name, sortBy, order, size);
  }

  change(update) {
    Object.assign(this.filters, update);
    this.tokens = [null];
    this.pageIndex = 0;
    this.refreshNow();
  }

  turn(delta) {
    this.pageIndex = Math.max(0, Math.min(this.tokens.length - 1, this.pageIndex + delta));
    this.refreshNow();
  }

  async refresh() {
    const f = this.filters;
    const data = await get("/dashboard/api/jobs", {
      StatusEquals: f.status,
      NameContains: f.name,
      SortBy: f.sortBy,
      SortOrder: f.sortOrder,
      MaxResults: f.pageSize,
      NextToken: this.tokens[this.pageIndex],
    });
    this.loaded = true;
    this.tokens = this.tokens.slice(0, this.pageIndex + 1);
    if (data.NextToken) this.tokens.push(data.NextToken);
    this.render(data.Jobs);
  }

  // Called when a refresh failed: before any data arrived, the table says so itself.
  failed(message) {
    if (!this.loaded) replaceChildren(this.state, `Could not load the jobs: ${message}`);
  }

  render(jobs) {
    replaceChildren(this.body, jobs.map((job) => row(job)));
    const filtered = this.filters.status || this.filters.name;
    let note = "";
    if (!jobs.length) note = filtered ? "No jobs match these filters." : "No optimization jobs yet. Create one with `aws sagemaker create-optimization-job`.";
    replaceChildren(this.state, note);
    this.state.hidden = !note;
    replaceChildren(this.pageLabel, `Page ${this.pageIndex + 1}`);
    this.previous.disabled = this.pageIndex === 0;
    this.next.disabled = this.pageIndex >= this.tokens.length - 1;
  }
}

function row(job) {
  const name = job.OptimizationJobName;
  const progress = job.ProgressPercent ?? (job.OptimizationJobStatus === "COMPLETED" ? 100 : null);
  return h(
    "tr",
    { dataset: { job: name, status: job.OptimizationJobStatus } },
    h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(name)}`, class: "job-link" }, name)),
    h("td", {}, h("span", { class: statusClass(job.OptimizationJobStatus) }, job.OptimizationJobStatus)),
    h("td", {}, job.Stage ?? "—"),
    h("td", { class: "progress-cell" }, progressBar(progress)),
    h("td", {}, duration(job.EtaSeconds)),
    h("td", { class: "model", title: job.Model }, job.Model),
    h("td", {}, job.Technique ?? "—"),
    h("td", {}, time(job.CreationTime)),
    h("td", {}, time(job.OptimizationStartTime)),
    h("td", {}, time(job.OptimizationEndTime)),
    h("td", { class: "failure" }, job.FailureReason ?? ""),
  );
}

export function progressBar(value) {
  if (value === null || value === undefined) return "—";
  return h(
    "span",
    { class: "progress" },
    h("span", { class: "progress-fill", style: `width: ${Math.max(0, Math.min(100, value))}%` }),
    h("span", { class: "progress-text" }, percent(value)),
  );
}
