package devices

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/uptrace/bun"
)

// The statements of a check-in that changes something have fixed text and
// bound values ($1, $2 …, which the SQLite driver binds by number too).
// PostgreSQL's driver prepares each once per connection and the server
// plans it from its cache; bun's statements, their values formatted into
// the text, were parsed and planned on every call, which was more than
// half of PostgreSQL's time on a changed check-in (docs/benchmarks.md).
// The reads are bun's own SELECTs of the models, made once, with bound
// values; their rows go through bun's scanner.

// checkinReads are the texts of the reads of a changed check-in.
type checkinReads struct {
	lockDevice string // the lockedDevice ($1), locked until the transaction ends
	accounts   string // the local accounts of a device ($1)
	offline    string // the offline users of a device ($1)
	commands   string // the pending commands of a device ($1), oldest first
}

// lockedDevice is the device a changed check-in locks, with whether it has
// offline users: when it has none and the check-in reports none, their
// read (a round trip) is skipped.
type lockedDevice struct {
	Device          `bun:",extend"`
	HasOfflineUsers bool `bun:"has_offline_users,scanonly"`
}

func newCheckinReads(db *bun.DB, d devicesDialect) checkinReads {
	return checkinReads{
		// The device's columns by name (?TableColumns), not "*": a column
		// the model does not know would fail bun's scan.
		lockDevice: d.LockRows(db.NewSelect().Model((*lockedDevice)(nil)).ColumnExpr("?TableColumns").
			ColumnExpr("EXISTS (SELECT 1 FROM device_offline_users AS o WHERE o.device_id = ?TableAlias.id) AS has_offline_users").
			Where("?TableAlias.id = $1"), "UPDATE").String(),
		accounts: db.NewSelect().Model((*LocalAccount)(nil)).Where("device_id = $1").String(),
		offline:  db.NewSelect().Model((*OfflineUser)(nil)).Where("device_id = $1").String(),
		// The status is in the text, not bound: a generic plan then uses
		// the partial index of pending commands, and PostgreSQL stops
		// planning the statement anew on every call.
		commands: db.NewSelect().Model((*Command)(nil)).Where("device_id = $1 AND status = ?", CommandPending).OrderExpr("id").String(),
	}
}

// querier is a *sql.DB or a *sql.Tx: where a bound statement runs (bun's
// own QueryContext would format the values into the text).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// scanBound runs a read of checkinReads with its values and scans its rows
// into dest (a model or a slice of models) with bun's scanner. A model
// stays as it was when there is no row (no sql.ErrNoRows, unlike bun's
// Scan).
func (s *DeviceStore) scanBound(ctx context.Context, q querier, dest any, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return s.db.ScanRows(ctx, rows, dest) // closes rows
}

// checkinColumns are the device columns a check-in writes and their
// values: the contact times always; the report (digest, facts) unless an
// uninstall was requested.
func checkinColumns(d *Device, report bool) (cols []string, vals []any) {
	cols = []string{"last_contact_time", "inactive_after"}
	vals = []any{d.LastContactTime, d.InactiveAfter}
	if !report {
		return cols, vals
	}
	f := &d.DeviceFacts
	cols = append(cols, "reported_digest", "updated_at",
		"name", "os_type", "os_distribution", "os_major_version", "os_release_name",
		"os_build_version", "serial_number", "ip_address", "agent_version", "join_type",
		"domain", "tenant", "dns_hostname", "container", "managed_by", "owner", "mdm", "description")
	vals = append(vals, d.ReportedDigest, d.UpdatedAt,
		f.Name, f.OSType, f.OSDistribution, f.OSMajorVersion, f.OSReleaseName,
		f.OSBuildVersion, f.SerialNumber, f.IPAddress, f.AgentVersion, f.JoinType,
		f.Domain, f.Tenant, f.DNSHostname, f.Container, f.ManagedBy, f.Owner, f.MDM, f.Description)
	return cols, vals
}

// boundUpdate is "UPDATE table SET col = $first, … WHERE id = $next", the
// placeholders numbered from first.
func boundUpdate(table string, cols []string, first int) string {
	var b strings.Builder
	b.WriteString("UPDATE ")
	b.WriteString(table)
	b.WriteString(" SET ")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c)
		b.WriteString(" = $")
		b.WriteString(strconv.Itoa(first + i))
	}
	b.WriteString(" WHERE id = $")
	b.WriteString(strconv.Itoa(first + len(cols)))
	return b.String()
}

// accountChangeColumns are the columns of a local account a check-in
// changes (reconcileAccounts), as SQLite's recordCheckIn writes them.
var accountChangeColumns = []string{"permission_level", "last_login", "updated_at"}

// recordCheckIn is one statement: the device's checkinColumns and, when
// accounts changed, theirs, each account a CTE of its own before the
// device's UPDATE with its values bound one by one. (One CTE over arrays
// of the accounts was planned anew on every call, 133 µs, as PostgreSQL
// does not know an array's length in a generic plan; the text of k
// accounts is one statement for the driver's cache whatever the values.)
func (devicesPG) recordCheckIn(ctx context.Context, tx bun.Tx, d *Device, report bool, changed []*LocalAccount) error {
	cols, vals := checkinColumns(d, report)
	args := make([]any, 0, 4*len(changed)+len(vals)+1)
	var b strings.Builder
	for i, a := range changed {
		if i == 0 {
			b.WriteString("WITH ")
		} else {
			b.WriteString(", ")
		}
		n := len(args)
		fmt.Fprintf(&b, "account%d AS (UPDATE device_accounts SET permission_level = $%d, last_login = $%d, updated_at = $%d WHERE id = $%d) ",
			i, n+1, n+2, n+3, n+4)
		args = append(args, a.PermissionLevel, a.LastLogin, a.UpdatedAt, a.ID)
	}
	b.WriteString(boundUpdate("devices", cols, len(args)+1))
	args = append(append(args, vals...), d.ID)
	_, err := tx.Tx.ExecContext(ctx, b.String(), args...)
	return err
}

// On SQLite the writes stay bun's, which stores times as text in its own
// format (the driver's would differ); a statement costs no round trip
// there.

func (devicesSQLite) recordCheckIn(ctx context.Context, tx bun.Tx, d *Device, report bool, changed []*LocalAccount) error {
	for _, a := range changed {
		if _, err := tx.NewUpdate().Model(a).WherePK().Column(accountChangeColumns...).Exec(ctx); err != nil {
			return err
		}
	}
	cols, _ := checkinColumns(d, report)
	_, err := tx.NewUpdate().Model(d).WherePK().Column(cols...).Exec(ctx)
	return err
}
