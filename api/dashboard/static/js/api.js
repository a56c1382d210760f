// Signed calls to the api. Every failure becomes an ApiError whose ``kind`` the pages show
// differently: "network" (api down), "auth" (signature or key rejected), "aws" (the
// operation's own error, e.g. ValidationException), "server".

import { canonicalQuery, signRequest, uriEncode } from "./sigv4.js";
import { loadSession } from "./session.js";

const AUTH_CODES = new Set([
  "UnrecognizedClientException",
  "InvalidSignatureException",
  "IncompleteSignatureException",
  "MissingAuthenticationTokenException",
  "AccessDeniedException",
  "NotSignedIn",
]);

export class ApiError extends Error {
  constructor(kind, code, message, status = 0) {
    super(message);
    this.kind = kind;
    this.code = code;
    this.status = status;
  }
}

export function jobPath(name, suffix = "") {
  return `/v1/optimization-jobs/${uriEncode(name)}${suffix}`;
}

export function dashboardJobPath(name, suffix) {
  return `/dashboard/api/jobs/${uriEncode(name)}${suffix}`;
}

export async function call(method, path, { params = {}, credentials = loadSession() } = {}) {
  if (!credentials) throw new ApiError("auth", "NotSignedIn", "Sign in with an access key first.");
  const query = canonicalQuery(params);
  const body = "";
  let headers;
  try {
    headers = signRequest({ method, path, query, body, host: location.host, credentials });
  } catch (error) {
    throw new ApiError("auth", "NotSignedIn", `Sign in again: ${error.message}.`);
  }
  let response;
  try {
    response = await fetch(query ? `${path}?${query}` : path, { method, headers, cache: "no-store" });
  } catch (error) {
    throw new ApiError("network", "ApiUnreachable", `The api at ${location.origin} is not answering (${error.message}).`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : {};
  } catch {
    data = null;
  }
  if (response.ok && data !== null) return data;
  const code = data?.__type ?? `HTTP ${response.status}`;
  const message = data?.message ?? (text.slice(0, 300) || response.statusText);
  let kind = "aws";
  if (AUTH_CODES.has(code)) kind = "auth";
  else if (response.status >= 500 || data === null) kind = "server";
  throw new ApiError(kind, code, message, response.status);
}

export const get = (path, params) => call("GET", path, { params });
