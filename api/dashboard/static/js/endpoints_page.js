// Endpoints: status, the instances of each rollout, and live numbers read from the serving
// instances (tokens/s from the change in generated tokens between two refreshes, and the
// acceptance length of speculative decoding).

import { get } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { time } from "./format.js";

const COLUMNS = ["Name", "Status", "Config", "Instances", "Tokens/s", "Acceptance length", "Running", "Created"];

export class EndpointsPage {
  constructor(root) {
    this.loaded = false;
    this.previous = new Map(); // endpoint ARN -> {tokens, at}
    this.body = h("tbody", { id: "endpoints-body" });
    this.state = h("p", { class: "state", id: "endpoints-state" }, "Loading endpoints…");
    replaceChildren(
      root,
      h("h1", {}, "Endpoints"),
      h(
        "table",
        { class: "endpoints", id: "endpoints-table" },
        h("thead", {}, h("tr", {}, COLUMNS.map((c) => h("th", {}, c)))),
        this.body,
      ),
      this.state,
    );
  }

  async refresh() {
    const data = await get("/dashboard/api/endpoints", { MaxResults: 100 });
    this.loaded = true;
    const now = Date.now();
    replaceChildren(this.body, data.Endpoints.map((entry) => this.row(entry, now)));
    const note = data.Endpoints.length ? "" : "No endpoints. Deploy one with `aws sagemaker create-endpoint`.";
    replaceChildren(this.state, note, data.NextToken ? "Showing the first 100 endpoints." : "");
    this.state.hidden = !note && !data.NextToken;
  }

  failed(message) {
    if (!this.loaded) replaceChildren(this.state, `Could not load the endpoints: ${message}`);
  }

  rate(arn, tokens, now) {
    const before = this.previous.get(arn);
    this.previous.set(arn, { tokens, at: now });
    if (!before || tokens < before.tokens || now <= before.at) return "—";
    return ((tokens - before.tokens) / ((now - before.at) / 1000)).toFixed(1);
  }

  row(entry, now) {
    const endpoint = entry.Endpoint;
    const variant = (endpoint.ProductionVariants ?? [])[0] ?? {};
    const live = entry.Live;
    const status = [h("span", { class: `status status-${endpoint.EndpointStatus}` }, endpoint.EndpointStatus)];
    if (endpoint.FailureReason) status.push(h("div", { class: "failure" }, endpoint.FailureReason));
    return h(
      "tr",
      { dataset: { endpoint: endpoint.EndpointName } },
      h("td", {}, endpoint.EndpointName),
      h("td", {}, status),
      h("td", {}, endpoint.EndpointConfigName ?? "—"),
      h(
        "td",
        {},
        `${variant.CurrentInstanceCount ?? 0} / ${variant.DesiredInstanceCount ?? 0}`,
        h(
          "ul",
          { class: "instances" },
          entry.Instances.map((i) =>
            h("li", { dataset: { ordinal: String(i.Ordinal) } }, `#${i.Ordinal} (gen ${i.Generation}) ${i.Status}`,
              i.Restarts ? `, ${i.Restarts} restart(s)` : ""),
          ),
        ),
      ),
      h("td", { class: "tokens-per-second" }, this.rate(endpoint.EndpointArn, live.GeneratedTokens, now)),
      h("td", { class: "acceptance" }, live.AcceptanceLength == null ? "—" : live.AcceptanceLength.toFixed(2)),
      h("td", {}, String(live.RequestsRunning)),
      h("td", {}, time(endpoint.CreationTime)),
    );
  }
}
