package devices

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
)

// Command types and statuses. A pending command is resent at every
// check-in until the agent acknowledges it done or failed; a withdrawn one
// is no longer sent.
const (
	CmdLink              = "link"
	CmdUnlink            = "unlink"
	CmdRemoveOfflineUser = "remove_offline_user"
	CmdUninstall         = "uninstall"

	CommandPending   = "pending"
	CommandDone      = "done"
	CommandFailed    = "failed"
	CommandWithdrawn = "withdrawn"
)

// Link states of a local account (spec 2.4, 3).
const (
	LinkUnlinked = "unlinked"
	LinkPending  = "pending_link"
	LinkLinked   = "linked"
)

// Check-in limits.
const (
	MaxLocalAccounts   = 1000
	MaxOfflineUsers    = 1000
	MaxAcks            = 1000
	MaxAckMessageLen   = 1000
	MaxAccountNameLen  = 256
	maxOfflineJSONSize = 16 << 10
)

// PermissionLevels are a local account's permission levels (spec 2.4).
var PermissionLevels = []string{"Standard", "Administrator"}

// Command is an instruction waiting for a device's agent. Args is a JSON
// object the agent channel sends at the top level beside id and type.
type Command struct {
	bun.BaseModel `bun:"table:device_commands"`

	ID        int64           `bun:"id,pk"`
	OrgID     int64           `bun:"org_id"`
	DeviceID  int64           `bun:"device_id"`
	AccountID *int64          `bun:"account_id"`
	Type      string          `bun:"type"`
	Args      json.RawMessage `bun:"args,type:json"`
	Status    string          `bun:"status"`
	Message   string          `bun:"message"`
	CreatedAt time.Time       `bun:"created_at"`
	AckedAt   *time.Time      `bun:"acked_at"`
}

// LocalAccount is a local account of a device (spec 2.4) and its link.
type LocalAccount struct {
	bun.BaseModel `bun:"table:device_accounts"`

	ID              int64      `bun:"id,pk"`
	OrgID           int64      `bun:"org_id"`
	DeviceID        int64      `bun:"device_id"`
	UserName        string     `bun:"user_name"`
	PermissionLevel string     `bun:"permission_level"`
	LastLogin       *time.Time `bun:"last_login"`
	LinkStatus      string     `bun:"link_status"`
	LinkType        string     `bun:"link_type"`
	LinkedAt        *time.Time `bun:"linked_at"`
	IdpUserID       *int64     `bun:"idp_user_id"`
	// LinkPermissionLevel is the level the link asked for.
	LinkPermissionLevel string `bun:"link_permission_level"`
	// LinkCommandID is the link command of a pending link.
	LinkCommandID *int64    `bun:"link_command_id"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// OfflineUser is a user enrolled on a device for logon while it is offline
// (spec 2.6); UserID is the identity user's id.
type OfflineUser struct {
	bun.BaseModel `bun:"table:device_offline_users"`

	DeviceID               int64           `bun:"device_id,pk"`
	UserID                 int64           `bun:"user_id,pk"`
	OrgID                  int64           `bun:"org_id"`
	DisplayName            string          `bun:"display_name"`
	UserName               string          `bun:"user_name"`
	SamAccountName         string          `bun:"sam_account_name"`
	LocalAccountName       string          `bun:"local_account_name"`
	EnrolledTime           *time.Time      `bun:"enrolled_time"`
	PrimarySource          json.RawMessage `bun:"primary_source,type:json"`
	EnrolledAuthenticators json.RawMessage `bun:"enrolled_authenticators,type:json"`
	// RemovalCommandID is the remove_offline_user command of an entry an
	// admin deleted: it is out of the lists, and reports of it are ignored
	// until the agent acknowledges the removal.
	RemovalCommandID *int64 `bun:"removal_command_id"`
}

// LinkEvent is one entry of the link history.
type LinkEvent struct {
	bun.BaseModel `bun:"table:device_link_history"`

	ID         int64     `bun:"id,pk"`
	OrgID      int64     `bun:"org_id"`
	DeviceID   int64     `bun:"device_id"`
	DeviceName string    `bun:"device_name"`
	AccountID  *int64    `bun:"account_id"`
	UserName   string    `bun:"user_name"`
	IdpUserID  *int64    `bun:"idp_user_id"`
	Action     string    `bun:"action"`
	LinkType   string    `bun:"link_type"`
	OldState   string    `bun:"old_state"`
	NewState   string    `bun:"new_state"`
	Reason     string    `bun:"reason"`
	Actor      string    `bun:"actor"`
	JobID      *int64    `bun:"job_id"`
	CreatedAt  time.Time `bun:"created_at"`
}

// AccountReport is a local account as an agent reports it.
type AccountReport struct {
	UserName        string     `json:"user_name"`
	PermissionLevel string     `json:"permission_level"`
	LastLogin       *time.Time `json:"last_login"`
}

// OfflineUserReport is an offline-enrolled user as an agent reports it.
type OfflineUserReport struct {
	ID                     string          `json:"id"`
	DisplayName            string          `json:"display_name"`
	UserName               string          `json:"user_name"`
	SamAccountName         string          `json:"sam_account_name"`
	LocalAccountName       string          `json:"local_account_name"`
	EnrolledTime           *time.Time      `json:"enrolled_time"`
	PrimarySource          json.RawMessage `json:"primary_source,omitempty"`
	EnrolledAuthenticators json.RawMessage `json:"enrolled_authenticators,omitempty"`
}

// Ack is an agent's answer to a command.
type Ack struct {
	CommandID string `json:"command_id"`
	Status    string `json:"status"`
	Message   string `json:"message"`
}

// CheckIn is what an agent reports at a check-in.
type CheckIn struct {
	Facts        DeviceFacts         `json:"facts"`
	Accounts     []AccountReport     `json:"local_accounts"`
	OfflineUsers []OfflineUserReport `json:"offline_enrolled_users"`
	Acks         []Ack               `json:"acks"`

	sum string // the digest of a SameReport
}

// SameReport is a check-in without acks reporting exactly what an earlier,
// validated check-in reported, digest being the Device.ReportedDigest that
// check-in left. The agent channel passes it when a device sends again the
// very bytes of a check-in it accepted, rather than decoding them again.
func SameReport(digest string) *CheckIn { return &CheckIn{sum: digest} }

// Validate checks a check-in's facts, accounts (unique names, permission
// levels), offline users and acks against their rules and limits, and puts
// the accounts and offline users in a canonical order.
func (in *CheckIn) Validate() error {
	if err := in.Facts.Validate(); err != nil {
		return err
	}
	if len(in.Accounts) > MaxLocalAccounts {
		return models.Invalid("local_accounts", "at most %d accounts", MaxLocalAccounts)
	}
	seen := make(map[string]bool, len(in.Accounts))
	for i := range in.Accounts {
		a := &in.Accounts[i]
		if a.PermissionLevel == "Admin" {
			a.PermissionLevel = "Administrator"
		}
		switch {
		case a.UserName == "" || len(a.UserName) > MaxAccountNameLen || !utf8.ValidString(a.UserName):
			return models.Invalid("local_accounts.user_name", "must be 1 to %d bytes of text", MaxAccountNameLen)
		case seen[a.UserName]:
			return models.Invalid("local_accounts.user_name", "%q is reported twice", a.UserName)
		case !models.OneOf(a.PermissionLevel, PermissionLevels):
			return models.Invalid("local_accounts.permission_level", "must be one of %v", PermissionLevels)
		}
		seen[a.UserName] = true
		if a.LastLogin != nil {
			t := a.LastLogin.UTC().Truncate(time.Microsecond)
			a.LastLogin = &t
		}
	}
	sort.Slice(in.Accounts, func(i, j int) bool { return in.Accounts[i].UserName < in.Accounts[j].UserName })
	if len(in.OfflineUsers) > MaxOfflineUsers {
		return models.Invalid("offline_enrolled_users", "at most %d users", MaxOfflineUsers)
	}
	ids := make(map[string]bool, len(in.OfflineUsers))
	for i := range in.OfflineUsers {
		u := &in.OfflineUsers[i]
		id, err := models.ParseID("offline_enrolled_users.id", u.ID)
		if err != nil {
			return err
		}
		u.ID = models.FormatID(id) // "+7" and "07" are 7
		if ids[u.ID] {
			return models.Invalid("offline_enrolled_users.id", "%s is reported twice", u.ID)
		}
		ids[u.ID] = true
		for _, s := range []string{u.DisplayName, u.UserName, u.SamAccountName, u.LocalAccountName} {
			if len(s) > MaxDeviceFieldLen || !utf8.ValidString(s) {
				return models.Invalid("offline_enrolled_users", "fields are text of at most %d bytes", MaxDeviceFieldLen)
			}
		}
		if len(u.PrimarySource)+len(u.EnrolledAuthenticators) > maxOfflineJSONSize {
			return models.Invalid("offline_enrolled_users", "primary_source and enrolled_authenticators are at most %d bytes", maxOfflineJSONSize)
		}
		if u.EnrolledTime != nil {
			t := u.EnrolledTime.UTC().Truncate(time.Microsecond)
			u.EnrolledTime = &t
		}
	}
	sort.Slice(in.OfflineUsers, func(i, j int) bool { return in.OfflineUsers[i].ID < in.OfflineUsers[j].ID })
	if len(in.Acks) > MaxAcks {
		return models.Invalid("acks", "at most %d acks", MaxAcks)
	}
	for i := range in.Acks {
		a := &in.Acks[i]
		id, err := models.ParseID("acks.command_id", a.CommandID)
		if err != nil {
			return err
		}
		a.CommandID = models.FormatID(id)
		if a.Status != CommandDone && a.Status != CommandFailed {
			return models.Invalid("acks.status", "must be done or failed")
		}
		if len(a.Message) > MaxAckMessageLen {
			return models.Invalid("acks.message", "at most %d bytes", MaxAckMessageLen)
		}
	}
	return nil
}

// UninstallCheckIn is the check-in of a device being uninstalled, which
// is never refused: only its acks count (CheckIn ignores the rest), and of
// those only the ones that can be applied: each decodes as an Ack, names a
// command id and says done or failed. A message is kept as valid text
// without NUL characters, cut at MaxAckMessageLen bytes; at most MaxAcks
// acks are kept.
func UninstallCheckIn(acks []json.RawMessage) *CheckIn {
	in := &CheckIn{}
	for _, raw := range acks {
		var a Ack
		if len(in.Acks) == MaxAcks || json.Unmarshal(raw, &a) != nil {
			continue
		}
		if _, err := models.ParseID("command_id", a.CommandID); err != nil || a.Status != CommandDone && a.Status != CommandFailed {
			continue
		}
		a.Message = strings.ReplaceAll(strings.ToValidUTF8(a.Message, ""), "\x00", "")
		if len(a.Message) > MaxAckMessageLen {
			cut := MaxAckMessageLen
			for cut > 0 && !utf8.RuneStart(a.Message[cut]) {
				cut--
			}
			a.Message = a.Message[:cut]
		}
		in.Acks = append(in.Acks, a)
	}
	return in
}

// digest is the digest of what the check-in reports (facts, accounts and
// offline users, in the canonical order Validate puts them in), which
// Device.ReportedDigest holds once the check-in is recorded; SameReport's
// own.
func (in *CheckIn) digest() string {
	if in.sum != "" {
		return in.sum
	}
	b, _ := json.Marshal(struct {
		F DeviceFacts
		A []AccountReport
		O []OfflineUserReport
	}{in.Facts, in.Accounts, in.OfflineUsers})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CheckIn records a device's check-in (the device from Authenticate) and
// returns the commands waiting for it, oldest first. It applies the acks,
// then the facts, local accounts (reconciled by name: new ones added,
// vanished ones removed with their link and pending commands, changes
// applied) and offline users. A check-in reporting what the previous one
// did, without acks, writes only last_contact_time, batched with others
// (ContactFlushInterval). Once an uninstall was
// requested, only acks are applied and only the uninstall is returned; the
// uninstall's done ack revokes the credential (and removes a deleted
// device). The caller validated in (CheckIn.Validate).
//
// An unchanged check-in records no audit event. The acks record
// device.account.linked (done, or a FAILURE for a failed link),
// device.account.unlinked (the device's answer to an unlink) and
// device.deleted (the uninstall ack that removes a deleted device); an
// account gone from the device takes its link with it
// (device.account.unlinked, or device.account.link_canceled when pending).
func (s *DeviceStore) CheckIn(ctx context.Context, dev *Device, in *CheckIn) ([]Command, error) {
	now := time.Now().UTC()
	digest := in.digest()
	if len(in.Acks) == 0 && (digest == dev.ReportedDigest || dev.UninstallRequestedAt != nil) {
		// Unchanged: the contact time joins the next batch
		// (ContactFlushInterval); the commands are those read with the
		// device by AuthenticateCheckIn, or read now.
		s.touch(dev, now)
		t := now
		dev.LastContactTime = &t
		if dev.pendingRead {
			cmds := dev.pending
			dev.pending, dev.pendingRead = nil, false
			return cmds, nil
		}
		return s.pendingCommands(ctx, s.db.DB, dev.ID)
	}
	var cmds []Command
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		var locked lockedDevice
		err := s.scanBound(ctx, tx.Tx, &locked, s.reads.lockDevice, dev.ID)
		if err != nil {
			return models.Unavailable(fmt.Errorf("read device: %w", err))
		}
		d := locked.Device
		if d.ID == 0 {
			return ErrBadDeviceCredentials // removed by a concurrent ack
		}
		for _, a := range in.Acks {
			if err = s.applyAck(ctx, tx, &d, a, now); err != nil {
				return err
			}
		}
		if d.SecretHash == nil {
			*dev = d // the uninstall was acknowledged: nothing more to do
			return nil
		}
		d.LastContactTime, d.InactiveAfter = &now, d.inactiveAfter(now)
		// The counts change with acks (a link confirmed) and with accounts
		// added or removed, not with an account's changed fields.
		recount := len(in.Acks) > 0
		var accs accountChanges
		if d.UninstallRequestedAt == nil {
			if accs, err = s.reconcileAccounts(ctx, tx, &d, in.Accounts, now); err != nil {
				return err
			}
			recount = recount || accs.added || accs.removed
			if locked.HasOfflineUsers || len(in.OfflineUsers) > 0 {
				if err = s.reconcileOffline(ctx, tx, &d, in.OfflineUsers); err != nil {
					return err
				}
			}
			d.DeviceFacts = in.Facts
			d.ReportedDigest = digest
			d.UpdatedAt = now
		}
		if err = s.d.recordCheckIn(ctx, tx, &d, d.UninstallRequestedAt == nil, accs.changed); err != nil {
			return fmt.Errorf("record check-in: %w", err)
		}
		if recount {
			if err = recountAccounts(ctx, tx, d.ID); err != nil {
				return err
			}
		}
		// The pending commands AuthenticateCheckIn read are still this
		// transaction's unless it changed them (acks, accounts gone) or an
		// uninstall was requested since. A command queued since then goes
		// with the next check-in, as an unchanged check-in's would.
		kept := dev.pendingRead && len(in.Acks) == 0 && !accs.removed &&
			(dev.UninstallRequestedAt == nil) == (d.UninstallRequestedAt == nil)
		pending := dev.pending
		*dev = d
		if kept {
			cmds = pending
			return nil
		}
		cmds, err = s.pendingCommands(ctx, tx.Tx, d.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return cmds, nil
}

func (s *DeviceStore) pendingCommands(ctx context.Context, q querier, deviceID int64) ([]Command, error) {
	var cmds []Command
	if err := s.scanBound(ctx, q, &cmds, s.reads.commands, deviceID); err != nil {
		return nil, models.Unavailable(fmt.Errorf("read commands: %w", err))
	}
	return cmds, nil
}

// queueCommand adds a pending command for d.
func queueCommand(ctx context.Context, tx bun.IDB, d *Device, accountID *int64, typ string, args any) (*Command, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	c := &Command{ID: sqldb.NewID(), OrgID: d.OrgID, DeviceID: d.ID, AccountID: accountID, Type: typ,
		Args: b, Status: CommandPending, CreatedAt: time.Now().UTC()}
	if _, err := tx.NewInsert().Model(c).Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue command: %w", err)
	}
	return c, nil
}

// recountAccounts sets a device's account counts from its accounts; the
// caller holds the device row's lock.
func recountAccounts(ctx context.Context, tx bun.IDB, deviceID int64) error {
	_, err := tx.NewUpdate().Table("devices").
		Set("total_local_accounts = (SELECT count(*) FROM device_accounts WHERE device_id = ?)", deviceID).
		Set("linked_local_accounts = (SELECT count(*) FROM device_accounts WHERE device_id = ? AND link_status = ?)", deviceID, LinkLinked).
		Where("id = ?", deviceID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("count accounts: %w", err)
	}
	return nil
}

// applyAck applies one ack of a command of d. Acks of unknown commands, or
// of commands already answered, change nothing; the done ack of a link
// withdrawn meanwhile (cancel-link) queues an unlink, so the device ends
// as the server says.
func (s *DeviceStore) applyAck(ctx context.Context, tx bun.Tx, d *Device, a Ack, now time.Time) error {
	id, _ := strconv.ParseInt(a.CommandID, 10, 64)
	var c Command
	err := tx.NewSelect().Model(&c).Where("id = ? AND device_id = ?", id, d.ID).Scan(ctx)
	if err != nil {
		if models.IsNoRows(err) {
			return nil
		}
		return fmt.Errorf("read command: %w", err)
	}
	if c.Status == CommandWithdrawn && c.Type == CmdLink && a.Status == CommandDone && c.AckedAt == nil {
		var args struct {
			AccountID string `json:"account_id"`
			UserName  string `json:"user_name"`
		}
		_ = json.Unmarshal(c.Args, &args)
		if _, err := queueCommand(ctx, tx, d, c.AccountID, CmdUnlink, args); err != nil {
			return err
		}
	}
	if c.AckedAt != nil || c.Status != CommandPending && c.Status != CommandWithdrawn {
		return nil
	}
	wasPending := c.Status == CommandPending
	c.AckedAt = &now
	c.Message = a.Message
	if wasPending {
		c.Status = a.Status
	}
	if _, err := tx.NewUpdate().Model(&c).WherePK().Column("status", "message", "acked_at").Exec(ctx); err != nil {
		return fmt.Errorf("ack command: %w", err)
	}
	if !wasPending {
		return nil
	}
	switch c.Type {
	case CmdLink:
		return s.ackLink(ctx, tx, d, &c, a, now)
	case CmdUnlink:
		if err := recordUnlinkAck(ctx, d, &c, a); err != nil {
			return err
		}
		if a.Status == CommandFailed && c.AccountID != nil {
			return addHistory(ctx, tx, &LinkEvent{OrgID: d.OrgID, DeviceID: d.ID, DeviceName: d.Name,
				AccountID: c.AccountID, Action: "unlink_failed", OldState: LinkUnlinked, NewState: LinkUnlinked,
				Reason: a.Message, Actor: "agent"})
		}
	case CmdRemoveOfflineUser:
		if _, err := tx.NewDelete().Table("device_offline_users").
			Where("device_id = ? AND removal_command_id = ?", d.ID, c.ID).Exec(ctx); err != nil {
			return fmt.Errorf("remove offline user: %w", err)
		}
	case CmdUninstall:
		if a.Status != CommandDone {
			return nil
		}
		d.SecretHash = nil
		if d.DeletedAt != nil {
			if _, err := tx.NewDelete().Table("devices").Where("id = ?", d.ID).Exec(ctx); err != nil {
				return fmt.Errorf("remove device: %w", err)
			}
			return models.Record(ctx, models.AuditEvent{OrgID: d.OrgID, Type: audit.DeviceDeleted,
				Targets: []models.EventTarget{deviceTarget(d)},
				Reason:  "the agent acknowledged its uninstall: the deleted device is removed"})
		}
		if _, err := tx.NewUpdate().Table("devices").Set("secret_hash = NULL").Set("last_contact_time = ?", now).
			Where("id = ?", d.ID).Exec(ctx); err != nil {
			return fmt.Errorf("revoke device: %w", err)
		}
	}
	return nil
}

// ackLink makes the account of a done link command linked, or of a failed
// one unlinked with the reason in the history.
func (s *DeviceStore) ackLink(ctx context.Context, tx bun.Tx, d *Device, c *Command, a Ack, now time.Time) error {
	var acc LocalAccount
	err := tx.NewSelect().Model(&acc).Where("device_id = ? AND link_command_id = ?", d.ID, c.ID).Scan(ctx)
	if models.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read account: %w", err)
	}
	ev := &LinkEvent{OrgID: d.OrgID, DeviceID: d.ID, DeviceName: d.Name, AccountID: &acc.ID,
		UserName: acc.UserName, IdpUserID: acc.IdpUserID, LinkType: acc.LinkType,
		OldState: acc.LinkStatus, Actor: "agent", Reason: a.Message}
	before := linkStateOf(&acc)
	acc.LinkCommandID = nil
	acc.UpdatedAt = now
	if a.Status == CommandDone {
		acc.LinkStatus, acc.LinkedAt = LinkLinked, &now
		ev.Action = "link_confirmed"
	} else {
		acc.LinkStatus, acc.LinkType, acc.IdpUserID, acc.LinkPermissionLevel = LinkUnlinked, "", nil, ""
		ev.Action = "link_failed"
	}
	ev.NewState = acc.LinkStatus
	if _, err := tx.NewUpdate().Model(&acc).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("update account: %w", err)
	}
	// A failed link is recorded as the link's failure, with the agent's
	// message.
	result, reason := models.ResultSuccess, "the device applied the link"
	if a.Status != CommandDone {
		result, reason = models.ResultFailure, "the device could not apply the link: "+a.Message
	}
	if err := recordLink(ctx, tx, audit.DeviceAccountLinked, d, before, &acc, result, reason); err != nil {
		return err
	}
	return addHistory(ctx, tx, ev)
}

// recordUnlinkAck records the agent's answer to an unlink command c (the
// account was unlinked when the command was queued): device.account.unlinked,
// a failure when the device could not apply it.
func recordUnlinkAck(ctx context.Context, d *Device, c *Command, a Ack) error {
	var args struct {
		UserName string `json:"user_name"`
	}
	_ = json.Unmarshal(c.Args, &args) // the name is only the target's display name
	targets := make([]models.EventTarget, 0, 2)
	if c.AccountID != nil {
		targets = append(targets, audit.Target(LocalAccountTargetType, *c.AccountID, args.UserName))
	}
	targets = append(targets, deviceTarget(d))
	result, reason := models.ResultSuccess, "the device applied the unlink"
	if a.Status != CommandDone {
		result, reason = models.ResultFailure, "the device could not apply the unlink: "+a.Message
	}
	return models.Record(ctx, models.AuditEvent{OrgID: d.OrgID, Type: audit.DeviceAccountUnlinked, Targets: targets,
		Result: result, Reason: reason})
}

func addHistory(ctx context.Context, tx bun.IDB, ev *LinkEvent) error {
	ev.ID = sqldb.NewID()
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = time.Now().UTC()
	}
	if _, err := tx.NewInsert().Model(ev).Exec(ctx); err != nil {
		return fmt.Errorf("record link history: %w", err)
	}
	return nil
}

// accountChanges is what reconcileAccounts did, and what it leaves to
// recordCheckIn.
type accountChanges struct {
	added   bool            // accounts added
	removed bool            // accounts removed, their pending commands withdrawn
	changed []*LocalAccount // accounts whose accountChangeColumns are to be written
}

// reconcileAccounts makes d's accounts those reported: it adds and removes
// accounts, and returns those whose fields changed for recordCheckIn to
// write with the device.
func (s *DeviceStore) reconcileAccounts(ctx context.Context, tx bun.Tx, d *Device, reported []AccountReport, now time.Time) (accountChanges, error) {
	var out accountChanges
	var have []LocalAccount
	if err := s.scanBound(ctx, tx.Tx, &have, s.reads.accounts, d.ID); err != nil {
		return out, fmt.Errorf("read accounts: %w", err)
	}
	byName := make(map[string]*LocalAccount, len(have))
	for i := range have {
		byName[have[i].UserName] = &have[i]
	}
	var add []LocalAccount
	for _, r := range reported {
		a, ok := byName[r.UserName]
		if !ok {
			add = append(add, LocalAccount{ID: sqldb.NewID(), OrgID: d.OrgID, DeviceID: d.ID, UserName: r.UserName,
				PermissionLevel: r.PermissionLevel, LastLogin: r.LastLogin, LinkStatus: LinkUnlinked,
				CreatedAt: now, UpdatedAt: now})
			continue
		}
		delete(byName, r.UserName)
		if a.PermissionLevel == r.PermissionLevel && sameTime(a.LastLogin, r.LastLogin) {
			continue
		}
		a.PermissionLevel, a.LastLogin, a.UpdatedAt = r.PermissionLevel, r.LastLogin, now
		out.changed = append(out.changed, a)
	}
	out.added = len(add) > 0
	if len(add) > 0 {
		if _, err := tx.NewInsert().Model(&add).Exec(ctx); err != nil {
			return out, fmt.Errorf("add accounts: %w", err)
		}
	}
	if len(byName) == 0 {
		return out, nil
	}
	vanished := make([]*LocalAccount, 0, len(byName))
	for _, a := range byName {
		vanished = append(vanished, a)
	}
	sort.Slice(vanished, func(i, j int) bool { return vanished[i].ID < vanished[j].ID })
	gone := make([]int64, 0, len(vanished))
	for _, a := range vanished {
		gone = append(gone, a.ID)
		if a.LinkStatus != LinkUnlinked {
			const why = "the account is no longer on the device"
			if err := addHistory(ctx, tx, &LinkEvent{OrgID: d.OrgID, DeviceID: d.ID, DeviceName: d.Name,
				AccountID: &a.ID, UserName: a.UserName, IdpUserID: a.IdpUserID, LinkType: a.LinkType,
				Action: "account_removed", OldState: a.LinkStatus, NewState: LinkUnlinked, Actor: "agent",
				Reason: why}); err != nil {
				return out, err
			}
			// The link goes with the account: an unlink, or a pending
			// link's cancel.
			typ := audit.DeviceAccountUnlinked
			if a.LinkStatus == LinkPending {
				typ = audit.DeviceAccountLinkCanceled
			}
			before := linkStateOf(a)
			unlinkAccount(a)
			if err := recordLink(ctx, tx, typ, d, before, a, "", why); err != nil {
				return out, err
			}
		}
	}
	if _, err := tx.NewUpdate().Table("device_commands").Set("status = ?", CommandWithdrawn).
		Where("device_id = ? AND status = ? AND account_id IN (?)", d.ID, CommandPending, bun.List(gone)).Exec(ctx); err != nil {
		return out, fmt.Errorf("withdraw commands: %w", err)
	}
	if _, err := tx.NewDelete().Table("device_accounts").Where("id IN (?)", bun.List(gone)).Exec(ctx); err != nil {
		return out, fmt.Errorf("remove accounts: %w", err)
	}
	out.removed = true
	return out, nil
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// reconcileOffline makes d's offline users those reported, but for entries
// whose removal waits for the agent's ack.
func (s *DeviceStore) reconcileOffline(ctx context.Context, tx bun.Tx, d *Device, reported []OfflineUserReport) error {
	var have []OfflineUser
	if err := s.scanBound(ctx, tx.Tx, &have, s.reads.offline, d.ID); err != nil {
		return fmt.Errorf("read offline users: %w", err)
	}
	byID := make(map[int64]*OfflineUser, len(have))
	for i := range have {
		byID[have[i].UserID] = &have[i]
	}
	var upsert []OfflineUser
	for _, r := range reported {
		id, _ := strconv.ParseInt(r.ID, 10, 64)
		h, ok := byID[id]
		delete(byID, id)
		if ok && h.RemovalCommandID != nil {
			continue
		}
		u := OfflineUser{DeviceID: d.ID, UserID: id, OrgID: d.OrgID, DisplayName: r.DisplayName,
			UserName: r.UserName, SamAccountName: r.SamAccountName, LocalAccountName: r.LocalAccountName,
			EnrolledTime: r.EnrolledTime, PrimarySource: r.PrimarySource, EnrolledAuthenticators: r.EnrolledAuthenticators}
		if ok && h.DisplayName == u.DisplayName && h.UserName == u.UserName && h.SamAccountName == u.SamAccountName &&
			h.LocalAccountName == u.LocalAccountName && sameTime(h.EnrolledTime, u.EnrolledTime) &&
			jsonEqual(h.PrimarySource, u.PrimarySource) && jsonEqual(h.EnrolledAuthenticators, u.EnrolledAuthenticators) {
			continue
		}
		upsert = append(upsert, u)
	}
	if len(upsert) > 0 {
		if _, err := tx.NewInsert().Model(&upsert).On("CONFLICT (device_id, user_id) DO UPDATE").
			Set("display_name = EXCLUDED.display_name").Set("user_name = EXCLUDED.user_name").
			Set("sam_account_name = EXCLUDED.sam_account_name").Set("local_account_name = EXCLUDED.local_account_name").
			Set("enrolled_time = EXCLUDED.enrolled_time").Set("primary_source = EXCLUDED.primary_source").
			Set("enrolled_authenticators = EXCLUDED.enrolled_authenticators").Exec(ctx); err != nil {
			return fmt.Errorf("save offline users: %w", err)
		}
	}
	var gone []int64
	for id, h := range byID {
		if h.RemovalCommandID == nil {
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		if _, err := tx.NewDelete().Table("device_offline_users").
			Where("device_id = ? AND user_id IN (?)", d.ID, bun.List(gone)).Exec(ctx); err != nil {
			return fmt.Errorf("remove offline users: %w", err)
		}
	}
	return nil
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || string(a) == "null" {
		return len(b) == 0 || string(b) == "null"
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
