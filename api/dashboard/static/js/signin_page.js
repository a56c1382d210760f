// The sign-in form: an access key pair, checked by one signed request before it is kept.

import { ApiError, call } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { describeError } from "./problems.js";
import { credentialsFor, saveSession } from "./session.js";

const ACCESS_KEY_PATTERN = /^[A-Za-z0-9]{3,128}$/;

export function renderSignIn(root, { onSignedIn, reason }) {
  const message = h("p", { class: "form-error", role: "alert", id: "signin-error" }, reason ?? "");
  const keyId = h("input", { id: "access-key-id", name: "access-key-id", autocomplete: "username", required: true });
  const secret = h("input", {
    id: "secret-access-key",
    name: "secret-access-key",
    type: "password",
    autocomplete: "current-password",
    required: true,
  });
  const region = h("input", { id: "region", name: "region", value: "us-east-1", required: true });
  // Every resource lives in the region its requests are signed for: start from the stack's
  // default, unless the user has typed one meanwhile.
  let regionEdited = false;
  region.addEventListener("input", () => {
    regionEdited = true;
  });
  fetch("/dashboard/defaults")
    .then((response) => (response.ok ? response.json() : null))
    .then((defaults) => {
      if (defaults?.region && !regionEdited) region.value = defaults.region;
    })
    .catch(() => {});
  const submit = h("button", { type: "submit", id: "sign-in" }, "Sign in");

  async function signIn(event) {
    event.preventDefault();
    const id = keyId.value.trim();
    if (!ACCESS_KEY_PATTERN.test(id)) {
      replaceChildren(message, "The access key id must be 3-128 letters and digits.");
      return;
    }
    if (!/^[a-z0-9-]{1,32}$/.test(region.value.trim())) {
      replaceChildren(message, "The region must be lower-case letters, digits and dashes, e.g. us-east-1.");
      return;
    }
    submit.disabled = true;
    replaceChildren(message, "Checking the key…");
    const credentials = credentialsFor(id, secret.value, region.value.trim());
    try {
      // Any signed read proves the pair: the api verifies the signature against the stored key.
      await call("GET", "/dashboard/api/jobs", { params: { MaxResults: 1 }, credentials });
    } catch (error) {
      const prefix = error instanceof ApiError && error.kind === "auth" ? "The api rejected the key: " : "";
      replaceChildren(message, prefix + describeError(error));
      submit.disabled = false;
      return;
    }
    secret.value = "";
    saveSession(credentials);
    onSignedIn();
  }

  replaceChildren(
    root,
    h(
      "form",
      { class: "signin", onsubmit: signIn },
      h("h1", {}, "Sign in"),
      h("p", {}, "Use an access key of your account (as for the AWS CLI). Requests are signed in this tab; the secret is not stored."),
      h("label", { for: "access-key-id" }, "Access key id"),
      keyId,
      h("label", { for: "secret-access-key" }, "Secret access key"),
      secret,
      h("label", { for: "region" }, "Region"),
      region,
      submit,
      message,
    ),
  );
  keyId.focus();
}
