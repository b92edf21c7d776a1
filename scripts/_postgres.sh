# Sourced by scripts/test: makes a Postgres reachable for the test suite and exports
# OMNIFORGE_TEST_POSTGRES_URL (an admin URL; each test run creates and drops its own database).
# Order: an explicit OMNIFORGE_TEST_POSTGRES_URL; a server on 127.0.0.1:$PGPORT (5432); else a
# throwaway server started from the local PostgreSQL binaries and stopped on exit.

_pg_reachable() {
    python3 - "$1" <<'PY' 2>/dev/null
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
PY
}

_pg_bin() {
    local name="$1" found
    found="$(command -v "$name" 2>/dev/null || true)"
    if [ -z "$found" ]; then
        found="$(ls -d /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)"
    fi
    echo "$found"
}

ensure_postgres() {
    if [ -n "${OMNIFORGE_TEST_POSTGRES_URL:-}" ]; then
        return 0
    fi
    local port="${PGPORT:-5432}"
    if _pg_reachable "$port"; then
        export OMNIFORGE_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/postgres"
        return 0
    fi
    local initdb pg_ctl
    initdb="$(_pg_bin initdb)"
    pg_ctl="$(_pg_bin pg_ctl)"
    if [ -z "$initdb" ] || [ -z "$pg_ctl" ]; then
        echo "==> Postgres: nothing listens on 127.0.0.1:$port and no PostgreSQL server binaries" \
            "(initdb, pg_ctl) were found, so the Postgres half of the suite will FAIL." \
            "Install PostgreSQL (apt install postgresql) or set OMNIFORGE_TEST_POSTGRES_URL." >&2
        return 0
    fi
    PG_THROWAWAY_DIR="$(mktemp -d /tmp/omniforge-pg.XXXXXX)"
    local run=()
    if [ "$(id -u)" = "0" ]; then
        # initdb refuses to run as root: the cluster belongs to the postgres user.
        chown postgres "$PG_THROWAWAY_DIR"
        run=(runuser -u postgres --)
    fi
    local free_port
    free_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    echo "==> Postgres: none on 127.0.0.1:$port; starting a throwaway server on port $free_port" >&2
    "${run[@]}" "$initdb" -D "$PG_THROWAWAY_DIR/data" -U postgres --auth=trust --no-sync >/dev/null
    "${run[@]}" "$pg_ctl" -D "$PG_THROWAWAY_DIR/data" -w -l "$PG_THROWAWAY_DIR/log" \
        -o "-c listen_addresses=127.0.0.1 -p $free_port -k $PG_THROWAWAY_DIR -c fsync=off" start >/dev/null
    PG_THROWAWAY_CTL=("${run[@]}" "$pg_ctl" -D "$PG_THROWAWAY_DIR/data" -m immediate stop)
    trap 'stop_throwaway_postgres' EXIT
    export OMNIFORGE_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$free_port/postgres"
}

stop_throwaway_postgres() {
    if [ -n "${PG_THROWAWAY_DIR:-}" ]; then
        "${PG_THROWAWAY_CTL[@]}" >/dev/null 2>&1 || true
        rm -rf "$PG_THROWAWAY_DIR"
    fi
}
