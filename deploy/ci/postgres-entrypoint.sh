#!/bin/sh
# The official postgres image's start-up, as far as Ember's compose file uses
# it: initialise an empty data directory with POSTGRES_USER as superuser and
# POSTGRES_PASSWORD (scram over TCP), run the init scripts against a server
# that listens on its unix socket only (so nothing connects half-way), then
# run the real server in the foreground.
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
    chown postgres "$pwfile"
    runuser -u postgres -- initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    runuser -u postgres -- pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    for script in /docker-entrypoint-initdb.d/*.sql; do
        [ -e "$script" ] || continue
        echo "running $script"
        runuser -u postgres -- psql -v ON_ERROR_STOP=1 -q -U "$POSTGRES_USER" -d postgres -f "$script"
    done
    runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
# setpriv execs (runuser would stay as PID 1 and keep the stop signal from
# the server): `docker stop` is PostgreSQL's fast shutdown, as in the
# official image.
exec setpriv --reuid=postgres --regid=postgres --init-groups -- postgres -D "$PGDATA"
