// The banner that tells why data is missing or stale: api down, signature rejected, or an
// operation's error. Pages keep showing their last data underneath it.

import { h, replaceChildren } from "./dom.js";

const TITLES = {
  network: "API unreachable",
  auth: "Signature rejected",
  server: "API error",
  aws: "Request failed",
};

export function describeError(error) {
  if (error?.kind) return `${error.code}: ${error.message}`;
  return String(error?.message ?? error);
}

export function showProblem(error, { onSignIn } = {}) {
  const banner = document.getElementById("banner");
  if (!error) {
    banner.hidden = true;
    replaceChildren(banner);
    return;
  }
  const kind = error.kind ?? "server";
  banner.hidden = false;
  banner.className = `banner banner-${kind}`;
  banner.dataset.kind = kind;
  const retrying = kind === "network" ? " Retrying every 2 seconds." : "";
  replaceChildren(
    banner,
    h("strong", {}, TITLES[kind] ?? "Error"),
    " ",
    h("span", { class: "banner-message" }, describeError(error) + retrying),
    kind === "auth" && onSignIn ? h("button", { type: "button", onclick: onSignIn }, "Sign in again") : null,
  );
}
