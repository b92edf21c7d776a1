# Sourced by scripts/test: makes a Redis reachable for the tests of the shared limit store and
# exports OMNIFORGE_TEST_REDIS_URL. Order: an explicit OMNIFORGE_TEST_REDIS_URL; a server on
# 127.0.0.1:6379; else a throwaway redis-server (no persistence) stopped on exit.

ensure_redis() {
    if [ -n "${OMNIFORGE_TEST_REDIS_URL:-}" ]; then
        return 0
    fi
    if _pg_reachable 6379; then
        export OMNIFORGE_TEST_REDIS_URL="redis://127.0.0.1:6379/0"
        return 0
    fi
    local server
    server="$(command -v redis-server 2>/dev/null || true)"
    if [ -z "$server" ]; then
        echo "==> Redis: nothing listens on 127.0.0.1:6379 and no redis-server was found, so" \
            "the Redis tests of the limit store will FAIL. Install Redis (apt install" \
            "redis-server) or set OMNIFORGE_TEST_REDIS_URL." >&2
        return 0
    fi
    REDIS_THROWAWAY_DIR="$(mktemp -d /tmp/omniforge-redis.XXXXXX)"
    local free_port
    free_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    echo "==> Redis: none on 127.0.0.1:6379; starting a throwaway server on port $free_port" >&2
    "$server" --bind 127.0.0.1 --port "$free_port" --save "" --appendonly no --daemonize yes \
        --dir "$REDIS_THROWAWAY_DIR" --pidfile "$REDIS_THROWAWAY_DIR/pid" \
        --logfile "$REDIS_THROWAWAY_DIR/log" >/dev/null
    local waited=0
    until _pg_reachable "$free_port"; do
        waited=$((waited + 1))
        if [ "$waited" -gt 50 ]; then
            echo "==> Redis: the throwaway server did not start; see $REDIS_THROWAWAY_DIR/log" >&2
            return 0
        fi
        sleep 0.1
    done
    trap 'stop_throwaway_postgres; stop_throwaway_redis' EXIT
    export OMNIFORGE_TEST_REDIS_URL="redis://127.0.0.1:$free_port/0"
}

stop_throwaway_redis() {
    if [ -n "${REDIS_THROWAWAY_DIR:-}" ] && [ -f "$REDIS_THROWAWAY_DIR/pid" ]; then
        kill "$(cat "$REDIS_THROWAWAY_DIR/pid")" 2>/dev/null || true
        rm -rf "$REDIS_THROWAWAY_DIR"
    fi
}
