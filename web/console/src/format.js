// Figures as the console shows them. Money stays exact: the API gives decimal strings.

export function usd(value, { digits } = {}) {
  if (value === null || value === undefined || value === "") return "—";
  const number = Number(value);
  if (number === 0) return "$0.00";
  const places = digits ?? (Math.abs(number) < 0.01 ? 6 : Math.abs(number) < 1 ? 4 : 2);
  return `$${number.toFixed(places)}`;
}

export function count(value) {
  if (value === null || value === undefined) return "—";
  return Number(value).toLocaleString("en-US");
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return date.toLocaleString("en-GB", {
    year: "numeric",
    month: "short",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : "—";
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

// How far `iso` is from now, in words: "in 4 min", "2 h ago".
export function relative(iso, now = Date.now()) {
  if (!iso) return "—";
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  const size = Math.abs(seconds);
  const amount =
    size < 60
      ? `${size} s`
      : size < 3600
        ? `${Math.round(size / 60)} min`
        : size < 86_400
          ? `${Math.round(size / 3600)} h`
          : `${Math.round(size / 86_400)} d`;
  return seconds >= 0 ? `in ${amount}` : `${amount} ago`;
}
