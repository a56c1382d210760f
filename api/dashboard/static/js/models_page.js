// Registered SageMaker models: image, model data, and the extra data channels; the
// eagle_model channel (an EAGLE head jobs start from) is marked.

import { get } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { time } from "./format.js";

const EAGLE_CHANNEL = "eagle_model";

export class ModelsPage {
  constructor(root) {
    this.loaded = false;
    this.body = h("tbody", { id: "models-body" });
    this.state = h("p", { class: "state", id: "models-state" }, "Loading models…");
    replaceChildren(
      root,
      h("h1", {}, "Models"),
      h(
        "table",
        { class: "models", id: "models-table" },
        h("thead", {}, h("tr", {}, ["Name", "Created", "Image", "Model data", "Data channels"].map((c) => h("th", {}, c)))),
        this.body,
      ),
      this.state,
    );
  }

  async refresh() {
    const data = await get("/dashboard/api/models", { MaxResults: 100 });
    this.loaded = true;
    replaceChildren(this.body, data.Models.map((model) => row(model)));
    const note = data.Models.length ? "" : "No models registered. Register one with `aws sagemaker create-model`.";
    replaceChildren(this.state, note, data.NextToken ? "Showing the first 100 models." : "");
    this.state.hidden = !note && !data.NextToken;
  }

  failed(message) {
    if (!this.loaded) replaceChildren(this.state, `Could not load the models: ${message}`);
  }
}

function containers(model) {
  return model.PrimaryContainer ? [model.PrimaryContainer] : (model.Containers ?? []);
}

function modelData(container) {
  return container.ModelDataSource?.S3DataSource?.S3Uri ?? container.ModelDataUrl ?? "—";
}

function channels(container) {
  return (container.AdditionalModelDataSources ?? []).map((source) =>
    h(
      "li",
      { class: source.ChannelName === EAGLE_CHANNEL ? "eagle-channel" : "", dataset: { channel: source.ChannelName } },
      h("strong", {}, source.ChannelName),
      source.ChannelName === EAGLE_CHANNEL ? " (EAGLE head)" : "",
      ": ",
      source.S3DataSource?.S3Uri ?? "—",
    ),
  );
}

function row(model) {
  const all = containers(model);
  return h(
    "tr",
    { dataset: { model: model.ModelName } },
    h("td", {}, model.ModelName),
    h("td", {}, time(model.CreationTime)),
    h("td", {}, all.map((c) => h("div", {}, c.Image ?? "—"))),
    h("td", {}, all.map((c) => h("div", { class: "uri" }, modelData(c)))),
    h("td", {}, h("ul", { class: "channels" }, all.flatMap((c) => channels(c)))),
  );
}
