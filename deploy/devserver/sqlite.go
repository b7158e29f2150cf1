package devserver

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"google.golang.org/protobuf/types/known/durationpb"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", the one the server's plugin uses
)

// clusterName names the single local cluster. It is persisted in the cluster
// metadata on first start and must not change afterwards.
const clusterName = "active"

// sqlStoreConfig is the server's view of DataDir/temporal.db.
//
// WAL journaling with synchronous=NORMAL keeps writes cheap; a committed
// transaction survives a crash of the process (not necessarily a power cut),
// which is the right trade-off for a development server. The server's SQLite
// plugin keeps a single connection per file, shared by all services.
func sqlStoreConfig(dbPath string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: dbPath,
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "normal",
			"busy_timeout": "10000",
		},
	}
}

// ensureSchema creates Temporal's SQLite schema when the file has none.
//
// The whole schema is created in one transaction on a private connection, so
// an interrupted first start leaves either an empty file (set up again next
// time) or a complete schema, never half of one. A file that has tables but
// not Temporal's is refused.
func ensureSchema(ctx context.Context, dbPath string) (created bool, err error) {
	q := url.Values{}
	q.Set("mode", "rwc")
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+dbPath+"?"+q.Encode())
	if err != nil {
		return false, err
	}
	defer func() { _ = db.Close() }() // the transaction below reports the writes' errors

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()

	var tables, namespaceTables int
	err = tx.QueryRowContext(ctx,
		`SELECT count(*), count(CASE WHEN name = 'namespaces' THEN 1 END)
		 FROM sqlite_master WHERE type = 'table'`,
	).Scan(&tables, &namespaceTables)
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", dbPath, err)
	}
	switch {
	case namespaceTables == 1:
		return false, tx.Rollback() // already set up
	case tables > 0:
		return false, fmt.Errorf("%s has tables but is not a Temporal database", dbPath)
	}

	if err = sqliteschema.SetupSchemaOnDB(txAdminDB{ctx: ctx, tx: tx}); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// txAdminDB runs the statements of sqliteschema.SetupSchemaOnDB inside our
// transaction. That helper only calls Exec (checked for server v1.32.1); any
// other AdminDB method would hit the nil embedded interface and panic.
type txAdminDB struct {
	sqlplugin.AdminDB
	ctx context.Context
	tx  *sql.Tx
}

func (a txAdminDB) Exec(stmt string, args ...any) error {
	_, err := a.tx.ExecContext(a.ctx, stmt, args...)
	return err
}

// ensureNamespace registers the namespace directly in the database, before
// the server starts, when it does not exist yet; an existing namespace is left
// untouched (search attributes and retention of an existing namespace are
// reconciled through the API once the server runs). Registering up front
// means the namespace and its search attributes are usable the moment the
// frontend answers, with no wait for the namespace cache to refresh.
func ensureNamespace(cfg *config.SQL, name string, retention time.Duration, attrs map[string]enums.IndexedValueType) error {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, name, false, attrs)
	if err != nil {
		return fmt.Errorf("namespace %q: %w", name, err)
	}
	ns.Detail.Config.Retention = durationpb.New(retention)
	if err := sqliteschema.CreateNamespaces(cfg, ns); err != nil {
		return fmt.Errorf("create namespace %q: %w", name, err)
	}
	return nil
}
