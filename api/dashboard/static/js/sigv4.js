// AWS Signature Version 4 for the dashboard's requests: the same signature the AWS CLI
// sends, verified by the api's own verifier (api/auth/sigv4.py).
// Only the derived signing key is kept; it is valid for one UTC day, one region and this
// service, so the secret access key itself is never stored.

import { hex, hmacSha256, sha256, utf8 } from "./sha256.js";

const ALGORITHM = "AWS4-HMAC-SHA256";
export const SERVICE = "sagemaker";
const TERMINATOR = "aws4_request";

// RFC 3986 encoding as SigV4 wants it: everything but A-Z a-z 0-9 - _ . ~ is %-encoded.
export function uriEncode(text) {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

export function amzDate(now) {
  return now.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, ""); // 20261122T073000Z
}

export function deriveSigningKey(secretAccessKey, date, region) {
  let key = hmacSha256(utf8(`AWS4${secretAccessKey}`), utf8(date));
  key = hmacSha256(key, utf8(region));
  key = hmacSha256(key, utf8(SERVICE));
  return hmacSha256(key, utf8(TERMINATOR));
}

// The query string as sent and as signed: pairs encoded one way, sorted by key then value.
export function canonicalQuery(params) {
  const pairs = Object.entries(params)
    .filter(([, value]) => value !== undefined && value !== null && value !== "")
    .map(([key, value]) => [uriEncode(key), uriEncode(String(value))]);
  pairs.sort(([k1, v1], [k2, v2]) => (k1 === k2 ? (v1 < v2 ? -1 : 1) : k1 < k2 ? -1 : 1));
  return pairs.map(([key, value]) => `${key}=${value}`).join("&");
}

// ``path`` is the path as sent (segments already uriEncode-d); non-S3 services encode it twice.
function canonicalUri(path) {
  return path
    .split("/")
    .map((segment) => uriEncode(segment))
    .join("/");
}

/**
 * Headers that sign a request for ``credentials`` ({accessKeyId, region, date, signingKey}).
 * ``host`` must be what the browser will send (location.host), ``body`` a string.
 */
export function signRequest({ method, path, query, body, host, credentials, now = new Date() }) {
  const stamp = amzDate(now);
  const date = stamp.slice(0, 8);
  if (date !== credentials.date) {
    throw new Error(`the signing key is for ${credentials.date} (UTC) and it is now ${date}`);
  }
  const payloadHash = hex(sha256(utf8(body)));
  const canonicalRequest = [
    method,
    canonicalUri(path),
    query,
    `host:${host}\nx-amz-date:${stamp}\n`,
    "host;x-amz-date",
    payloadHash,
  ].join("\n");
  const scope = `${date}/${credentials.region}/${SERVICE}/${TERMINATOR}`;
  const toSign = [ALGORITHM, stamp, scope, hex(sha256(utf8(canonicalRequest)))].join("\n");
  const signature = hex(hmacSha256(credentials.signingKey, utf8(toSign)));
  return {
    "X-Amz-Date": stamp,
    Authorization:
      `${ALGORITHM} Credential=${credentials.accessKeyId}/${scope}, ` +
      `SignedHeaders=host;x-amz-date, Signature=${signature}`,
  };
}
