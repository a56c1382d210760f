// Who the dashboard signs as. sessionStorage (gone when the tab closes) holds the key id,
// the region and the day's derived signing key, never the secret access key.

import { fromHex, hex } from "./sha256.js";
import { amzDate, deriveSigningKey } from "./sigv4.js";

const STORAGE_KEY = "eaglenest.dashboard.session";

export function todayUtc(now = new Date()) {
  return amzDate(now).slice(0, 8);
}

export function credentialsFor(accessKeyId, secretAccessKey, region, now = new Date()) {
  const date = todayUtc(now);
  return { accessKeyId, region, date, signingKey: deriveSigningKey(secretAccessKey, date, region) };
}

export function saveSession(credentials) {
  const stored = { ...credentials, signingKey: hex(credentials.signingKey) };
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(stored));
}

// The stored credentials, or null when there are none or they were for an earlier UTC day.
export function loadSession() {
  const text = sessionStorage.getItem(STORAGE_KEY);
  if (!text) return null;
  try {
    const stored = JSON.parse(text);
    if (stored.date !== todayUtc()) return null;
    return { ...stored, signingKey: fromHex(stored.signingKey) };
  } catch {
    return null;
  }
}

export function clearSession() {
  sessionStorage.removeItem(STORAGE_KEY);
}
