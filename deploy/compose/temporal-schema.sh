#!/bin/sh
# Creates Temporal's two databases in PostgreSQL and brings their schemas to
# the version of this admin-tools image (Temporal's self-hosting procedure:
# temporal-sql-tool create, setup-schema -v 0.0, update-schema). Every step is
# safe to repeat: an existing database or schema is left as it is and only
# missing versions are applied.
set -eu
tool() { temporal-sql-tool --plugin "$DB" --ep "$POSTGRES_SEEDS" -u "$POSTGRES_USER" -p "$DB_PORT" "$@"; }
schema=/etc/temporal/schema/postgresql/v12
for db in temporal:temporal temporal_visibility:visibility; do
	name=${db%%:*} dir=${db#*:}
	tool --db "$name" create || true # exists already on a restart
	tool --db "$name" setup-schema -v 0.0
	tool --db "$name" update-schema -d "$schema/$dir/versioned"
done
echo "Temporal schema ready"
