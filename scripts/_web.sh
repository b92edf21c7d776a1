# Sourced by scripts/run, scripts/test and scripts/bench: builds the service's browser assets
# (web/: the web console, Swagger UI and ReDoc from the locked npm packages) into app/static/,
# and makes the system Chromium available to the browser tests and the console benchmark.
#   ensure_web [required]   `npm ci` when web/package-lock.json changed, then web/build.mjs.
#                           Without Node: a warning (scripts/run: /docs then answers 503 saying
#                           how to build), or with `required` an error (scripts/test).
#   ensure_chromium         /usr/bin/chromium, installed with apt-get when missing and root;
#                           otherwise an error saying why (the browser tests never skip).
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
WEB="$ROOT/web"
CHROMIUM=/usr/bin/chromium

ensure_web() {
    local required="${1:-}"
    if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
        local why="Node.js 18+ with npm is needed to build the console and the API reference (web/)"
        if [ "$required" = required ]; then
            echo "==> web: $why; install it (apt-get install -y nodejs npm) and run again." >&2
            return 1
        fi
        echo "==> web: $why; /console, /docs and /redoc answer 503 until they are built." >&2
        return 0
    fi
    # `npm ci` only when the lock file changed since the last install.
    local digest stamp
    digest="$(sha256sum "$WEB/package-lock.json" | cut -c1-16)"
    stamp="$WEB/node_modules/.omniforge-$digest"
    if [ ! -f "$stamp" ]; then
        echo "==> web: npm ci (web/package-lock.json changed)" >&2
        (cd "$WEB" && npm ci --no-audit --no-fund --ignore-scripts >&2) || return 1
        touch "$stamp"
    fi
    (cd "$WEB" && node build.mjs >&2)
}

ensure_chromium() {
    if [ -x "$CHROMIUM" ]; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "==> browser tests: $CHROMIUM is missing and this is not root, so it cannot be" \
            "installed here. Run \`sudo apt-get install -y chromium\` (Debian/Ubuntu) and" \
            "run again." >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "==> browser tests: $CHROMIUM is missing and there is no apt-get to install it;" \
            "install Chromium so that $CHROMIUM exists, and run again." >&2
        return 1
    fi
    echo "==> browser tests: installing chromium with apt-get" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2 \
        || { echo "==> browser tests: apt-get could not install chromium (see above)." >&2; return 1; }
}
