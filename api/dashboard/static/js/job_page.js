// One job: the request as submitted, status history, live training curves, and once it
// is COMPLETED the published benchmark (plots and table) and artifacts. Stop and Delete
// call the same /v1 operations as the CLI and show their errors; each is disabled, with a
// tooltip saying why, where the job's status rules it out.

import { ApiError, call, dashboardJobPath, get, jobPath } from "./api.js";
import { lineChart } from "./charts.js";
import { h, replaceChildren } from "./dom.js";
import { bytes, duration, isActive, number, statusClass, time } from "./format.js";
import { deleteBlockedReason, stopBlockedReason } from "./job_actions.js";
import { progressBar } from "./jobs_page.js";
import { describeError } from "./problems.js";

// CreateOptimizationJob's members, in the CLI's order: `--cli-input-json` takes this document.
const REQUEST_MEMBERS = [
  "OptimizationJobName",
  "RoleArn",
  "ModelSource",
  "DeploymentInstanceType",
  "MaxInstanceCount",
  "OptimizationEnvironment",
  "OptimizationConfigs",
  "OutputConfig",
  "StoppingCondition",
  "VpcConfig",
  "Tags",
];

export function requestDocument(job) {
  const document = {};
  for (const member of REQUEST_MEMBERS) {
    const value = job[member];
    if (value !== undefined && value !== null && !(Array.isArray(value) && !value.length)) document[member] = value;
  }
  return document;
}

export class JobPage {
  constructor(root, name, { refreshNow, onDeleted }) {
    this.name = name;
    this.refreshNow = refreshNow;
    this.onDeleted = onDeleted;
    this.results = null; // fetched once, when the job is COMPLETED
    this.loaded = false;
    this.jobStatus = null; // the last status shown; null until loaded or once the job is gone
    this.missing = false;
    this.busy = false; // a Stop or Delete is in flight
    this.status = h("span", { id: "job-status" });
    this.actionMessage = h("p", { class: "action-message", id: "action-message", role: "status" });
    this.stopButton = h("button", { type: "button", id: "stop-job", onclick: () => this.stop() }, "Stop");
    this.deleteButton = h("button", { type: "button", id: "delete-job", class: "danger", onclick: () => this.askDelete() }, "Delete");
    this.confirm = h("span", { class: "confirm", id: "delete-confirm", hidden: true });
    this.summary = h("dl", { class: "summary", id: "job-summary" }, h("dt", {}, "Loading…"));
    this.training = h("div", { class: "charts", id: "training-charts" });
    this.benchmark = h("div", { id: "benchmark" });
    this.request = h("pre", { class: "request", id: "job-request" });
    this.history = h("tbody", { id: "job-events" });
    replaceChildren(
      root,
      h("p", {}, h("a", { href: "#/jobs" }, "← All jobs")),
      h("h1", {}, name, " ", this.status),
      h("div", { class: "actions" }, this.stopButton, this.deleteButton, this.confirm),
      this.actionMessage,
      this.summary,
      h("h2", {}, "Training progress"),
      this.training,
      h("h2", {}, "Benchmark and artifacts"),
      this.benchmark,
      h("h2", {}, "Status history"),
      h("table", { class: "events" }, h("thead", {}, h("tr", {}, ["Time", "Status", "Stage", "Worker", "Message"].map((c) => h("th", {}, c)))), this.history),
      h("h2", {}, "Request (aws sagemaker create-optimization-job --cli-input-json)"),
      this.request,
    );
    this.updateActions();
  }

  async refresh() {
    let job;
    try {
      job = await get(jobPath(this.name));
    } catch (error) {
      if (error instanceof ApiError && error.code === "ResourceNotFound") {
        replaceChildren(this.summary, h("dt", {}, `No optimization job named ${this.name} in this account.`));
        this.jobStatus = null;
        this.missing = true;
        this.updateActions();
        return;
      }
      throw error;
    }
    const curve = await get(dashboardJobPath(this.name, "/training"));
    if (job.OptimizationJobStatus === "COMPLETED" && this.results === null) {
      this.results = await get(dashboardJobPath(this.name, "/results"));
    }
    this.loaded = true;
    this.render(job, curve.Points);
  }

  failed(message) {
    if (!this.loaded) replaceChildren(this.summary, h("dt", {}, `Could not load the job: ${message}`));
  }

  render(job, points) {
    const status = job.OptimizationJobStatus;
    this.status.className = statusClass(status);
    this.status.dataset.status = status;
    replaceChildren(this.status, status);
    this.jobStatus = status;
    this.missing = false;
    this.updateActions();
    replaceChildren(
      this.summary,
      item("Stage", job.Stage ?? "—"),
      item("Progress", progressBar(job.ProgressPercent ?? (status === "COMPLETED" ? 100 : null))),
      item("ETA", isActive(status) ? duration(job.EtaSeconds) : "—"),
      item("Latest message", job.LastMessage ?? "—"),
      job.FailureReason ? item("Failure reason", h("span", { class: "failure" }, job.FailureReason)) : null,
      item("Created", time(job.CreationTime)),
      item("Started", time(job.OptimizationStartTime)),
      item("Ended", time(job.OptimizationEndTime)),
      item("ARN", job.OptimizationJobArn),
      item("Tags", tagList(job.Tags ?? [])),
    );
    this.renderTraining(points);
    this.renderBenchmark(status, job.DeploymentRecommendation);
    replaceChildren(
      this.history,
      (job.Events ?? []).map((event) =>
        h("tr", {}, h("td", {}, time(event.Time)), h("td", {}, h("span", { class: statusClass(event.Status) }, event.Status)), h("td", {}, event.Stage ?? ""), h("td", { class: "worker" }, workerText(event.Worker)), h("td", {}, event.Message)),
      ),
    );
    replaceChildren(this.request, JSON.stringify(requestDocument(job), null, 2));
  }

  renderTraining(points) {
    const positions = Math.max(0, ...points.map((p) => p.StepAccuracy.length));
    replaceChildren(
      this.training,
      lineChart({
        title: "Training loss",
        xLabel: "step",
        yLabel: "loss",
        series: [{ name: "loss", points: points.map((p) => ({ x: p.Step, y: p.Loss ?? null })) }],
      }),
      lineChart({
        title: "Acceptance by draft position",
        xLabel: "step",
        yLabel: "accuracy",
        series: Array.from({ length: positions }, (_, i) => ({
          name: `position ${i + 1}`,
          points: points.map((p) => ({ x: p.Step, y: p.StepAccuracy[i] ?? null })),
        })),
      }),
    );
  }

  renderBenchmark(status, recommendation) {
    const results = this.results;
    if (!results) {
      replaceChildren(this.benchmark, h("p", { class: "empty" }, status === "COMPLETED" ? "Loading results…" : `Results are published when the job is COMPLETED (it is ${status}).`));
      return;
    }
    if (!results.Available) {
      replaceChildren(this.benchmark, h("p", { class: "empty" }, `No results: ${results.Reason}`));
      return;
    }
    const rows = results.Benchmark;
    const configurations = [...new Set(rows.map((r) => r.Configuration))];
    const byConfiguration = (field) =>
      configurations.map((name) => ({
        name,
        points: rows.filter((r) => r.Configuration === name).map((r) => ({ x: r.Concurrency, y: r[field] ?? null })),
      }));
    replaceChildren(
      this.benchmark,
      h(
        "div",
        { class: "charts" },
        lineChart({ title: "Output throughput", xLabel: "concurrency", yLabel: "tokens/s", series: byConfiguration("OutputThroughput") }),
        lineChart({ title: "Time per output token", xLabel: "concurrency", yLabel: "TPOT ms", series: byConfiguration("TpotMs") }),
      ),
      recommendationPanel(recommendation),
      benchmarkTable(rows),
      requestShortfalls(results.RequestShortfalls || []),
      metricDefinitions(results.MetricDefinitions || {}),
      h("h3", {}, "Published artifacts"),
      h(
        "ul",
        { class: "artifacts", id: "artifacts" },
        results.Artifacts.map((a) => h("li", {}, h("a", { href: a.Uri }, a.Uri), ` (${bytes(a.Size)}, sha256 ${a.Sha256 ?? "—"})`)),
        h("li", {}, h("a", { href: results.LineageUri }, results.LineageUri), " (lineage)"),
      ),
    );
  }

  async stop() {
    await this.act(() => call("POST", jobPath(this.name, "/stop")), "Stop requested.");
  }

  askDelete() {
    this.confirm.hidden = false;
    replaceChildren(
      this.confirm,
      `Delete ${this.name}? `,
      h("button", { type: "button", id: "confirm-delete", class: "danger", onclick: () => this.delete() }, "Yes, delete"),
      h("button", { type: "button", onclick: () => (this.confirm.hidden = true) }, "Cancel"),
    );
  }

  async delete() {
    this.confirm.hidden = true;
    const deleted = await this.act(() => call("DELETE", jobPath(this.name)), "Deleted.");
    if (deleted) this.onDeleted(this.name);
  }

  // The api rejects Stop and Delete in the wrong status anyway; disabling them up front says
  // why before the click instead of after it.
  updateActions() {
    let unavailable = null;
    if (this.busy) unavailable = "Working…";
    else if (this.missing) unavailable = "The job no longer exists.";
    else if (this.jobStatus === null) unavailable = "Loading the job…";
    const deleteBlocked = unavailable ?? deleteBlockedReason(this.jobStatus);
    allowAction(this.stopButton, unavailable ?? stopBlockedReason(this.jobStatus));
    allowAction(this.deleteButton, deleteBlocked);
    if (deleteBlocked !== null && !this.busy) this.confirm.hidden = true;
  }

  async act(operation, done) {
    this.busy = true;
    this.updateActions();
    replaceChildren(this.actionMessage, "Working…");
    this.actionMessage.className = "action-message";
    try {
      await operation();
      replaceChildren(this.actionMessage, done);
      this.refreshNow();
      return true;
    } catch (error) {
      this.actionMessage.className = "action-message error";
      replaceChildren(this.actionMessage, describeError(error));
      return false;
    } finally {
      this.busy = false;
      this.updateActions();
    }
  }
}

// The worker process that recorded an event: "host (pid 123, cpu)"; empty for the api's own.
function workerText(worker) {
  return worker ? `${worker.Hostname} (pid ${worker.Pid}, ${worker.Device})` : "";
}

// Enabled when ``blocked`` is null; otherwise disabled, with ``blocked`` as the tooltip.
function allowAction(button, blocked) {
  button.disabled = blocked !== null;
  if (blocked === null) button.removeAttribute("title");
  else button.title = blocked;
}

function item(label, value) {
  return [h("dt", {}, label), h("dd", {}, value)];
}

// The job's tags (CreateOptimizationJob's Tags plus AddTags/DeleteTags since), as key=value.
function tagList(tags) {
  if (!tags.length) return h("span", { id: "job-tags", class: "empty" }, "—");
  return h("ul", { id: "job-tags", class: "tags" }, tags.map((tag) => h("li", { "data-key": tag.Key }, `${tag.Key}=${tag.Value}`)));
}

// What to deploy per concurrency level (the job's DeploymentRecommendation): the fastest
// configuration, or plain decoding where no head beat No EAGLE beyond the noise margin.
function recommendationPanel(recommendation) {
  if (!recommendation) return h("p", { class: "empty", id: "recommendation" }, "No deployment recommendation for this job.");
  return h(
    "section",
    { id: "recommendation" },
    h("h3", {}, "Deployment recommendation"),
    h(
      "ul",
      {},
      recommendation.levels.map((level) =>
        h(
          "li",
          { "data-concurrency": String(level.concurrency), "data-enable": String(level.enable_speculative_decoding) },
          level.enable_speculative_decoding
            ? `Concurrency ${level.concurrency}: enable EAGLE — ${level.configuration} (${number(level.speedup_vs_no_eagle, 2)}x No EAGLE)`
            : `Concurrency ${level.concurrency}: do not enable speculative decoding` +
                (level.best_speculative ? ` (best head configuration ${level.best_speculative}: ${number(level.best_speculative_speedup, 2)}x)` : ""),
          // No EAGLE runs before and after the heads; a gap beyond the margin means the load changed.
          level.no_eagle_spread > recommendation.min_speedup
            ? ` [No EAGLE's two runs differed ${number(level.no_eagle_spread, 2)}x: the load changed]`
            : "",
        ),
      ),
    ),
  );
}

function benchmarkTable(rows) {
  const columns = [
    ["Configuration", (r) => r.Configuration],
    ["Concurrency", (r) => r.Concurrency],
    ["TTFT (ms)", (r) => number(r.TtftMs)],
    ["TPOT (ms)", (r) => number(r.TpotMs)],
    ["ITL (ms)", (r) => number(r.ItlMs)],
    ["Request throughput (req/s)", (r) => number(r.RequestThroughput, 3)],
    ["Output throughput (tokens/s)", (r) => number(r.OutputThroughput)],
    ["OTPS per request", (r) => number(r.OtpsPerRequest)],
    ["Acceptance length", (r) => number(r.AcceptanceLength)],
    ["K", (r) => r.K ?? "—"],
    ["Speedup vs No EAGLE", (r) => (r.SpeedupVsNoEagle == null ? "—" : `${number(r.SpeedupVsNoEagle, 2)}x`)],
  ];
  return h(
    "table",
    { class: "benchmark", id: "benchmark-table" },
    h("thead", {}, h("tr", {}, columns.map(([title]) => h("th", {}, title)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, columns.map(([, value]) => h("td", {}, value(r)))))),
  );
}

// The rows whose means stand on fewer requests than a level sent, and why, from results.json.
function requestShortfalls(lines) {
  if (lines.length === 0) return h("span", {});
  return h("ul", { class: "shortfalls", id: "request-shortfalls" }, lines.map((line) => h("li", {}, line)));
}

// What each column means (TPOT and ITL as SageMaker's table means them), from results.json.
function metricDefinitions(definitions) {
  const names = Object.keys(definitions);
  if (names.length === 0) return h("span", {});
  return h("dl", { class: "definitions", id: "metric-definitions" }, names.flatMap((name) => [h("dt", {}, name), h("dd", {}, definitions[name])]));
}
