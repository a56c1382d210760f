// How values read in tables: times, durations, percentages, status colours.

export const STATUSES = ["STARTING", "INPROGRESS", "COMPLETED", "FAILED", "STOPPING", "STOPPED"];

export function time(epochSeconds) {
  if (epochSeconds === undefined || epochSeconds === null) return "—";
  return new Date(epochSeconds * 1000).toLocaleString(undefined, {
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
}

export function duration(seconds) {
  if (seconds === undefined || seconds === null) return "—";
  const total = Math.round(seconds);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const rest = total % 60;
  if (hours) return `${hours} h ${minutes} min`;
  if (minutes) return `${minutes} min ${rest} s`;
  return `${rest} s`;
}

export function percent(value) {
  return value === undefined || value === null ? "—" : `${value.toFixed(1)} %`;
}

export function number(value, digits = 2) {
  return value === undefined || value === null ? "—" : value.toFixed(digits);
}

export function bytes(size) {
  if (size === undefined || size === null) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = size;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

export function statusClass(status) {
  return `status status-${String(status).toLowerCase()}`;
}

export const isActive = (status) => ["STARTING", "INPROGRESS", "STOPPING"].includes(status);
