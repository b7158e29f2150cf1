package devices

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"fmt"
	"iam/models"
	"slices"
	"sync"
	"time"
)

// The check-in fast path. A device's check-in that reports what it
// reported before costs one statement, which reads the device's credential
// and state with its pending commands (AuthenticateCheckIn), and a share of
// one batched UPDATE of last_contact_time (ContactFlushInterval).

// ContactFlushInterval is how long the last_contact_time of an unchanged
// check-in may wait in the process before it is written: the store writes
// the contact times of all such check-ins of the interval in one statement.
// last_contact_time and agent_status (and the filters on them) lag by up to
// this much; a process that stops without Store.Close loses at most this
// much of contact times, which the devices' next check-ins write again.
// Check-ins that change something write theirs at once.
const ContactFlushInterval = time.Second

// contactTouch is the contact time of one device's unchanged check-in.
type contactTouch struct {
	id           int64
	at, inactive time.Time
}

// contacts batches the contact times of unchanged check-ins.
type contacts struct {
	mu        sync.Mutex
	pending   map[int64]contactTouch
	scheduled bool
	closed    bool       // the store closed: nothing is scheduled any more
	flushing  sync.Mutex // one flush at a time
}

// AuthenticateCheckIn is Authenticate for a check-in: one statement reads
// the device's credential, the fields a check-in needs (id, org_id,
// checkin_interval_seconds, reported_digest, uninstall_requested_at) and
// its pending commands, which a following CheckIn of an unchanged report
// answers without reading them again. EUNAUTHORIZED as Authenticate.
func (s *DeviceStore) AuthenticateCheckIn(ctx context.Context, id int64, devSecret string) (*Device, error) {
	rows, err := s.db.DB.QueryContext(ctx, s.d.checkinRead(), id)
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("read device: %w", err))
	}
	defer func() { _ = rows.Close() }() // rows.Err reports the read's errors
	var d *Device
	for rows.Next() {
		var (
			orgID, interval int64
			hash            []byte
			digest          string
			uninstall       sql.NullTime
			cmdID           sql.NullInt64
			cmdType         sql.NullString
			args            []byte
		)
		if err := rows.Scan(&orgID, &hash, &digest, &interval, &uninstall, &cmdID, &cmdType, &args); err != nil {
			return nil, models.Unavailable(fmt.Errorf("read device: %w", err))
		}
		if d == nil {
			d = &Device{ID: id, OrgID: orgID, SecretHash: hash, ReportedDigest: digest, CheckinIntervalSeconds: interval,
				pendingRead: true}
			if uninstall.Valid {
				t := uninstall.Time.UTC()
				d.UninstallRequestedAt = &t
			}
		}
		if cmdID.Valid {
			d.pending = append(d.pending, Command{ID: cmdID.Int64, OrgID: orgID, DeviceID: id, Type: cmdType.String,
				Args: slices.Clone(args), Status: CommandPending})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, models.Unavailable(fmt.Errorf("read device: %w", err))
	}
	if d == nil {
		return nil, ErrBadDeviceCredentials
	}
	sum := sha256.Sum256([]byte(devSecret))
	if d.SecretHash == nil || subtle.ConstantTimeCompare(d.SecretHash, sum[:]) != 1 {
		return nil, ErrBadDeviceCredentials
	}
	return d, nil
}

// touch records the contact time of dev's unchanged check-in, to be
// written within ContactFlushInterval.
func (s *DeviceStore) touch(dev *Device, now time.Time) {
	c := &s.contacts
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = make(map[int64]contactTouch)
	}
	if t, ok := c.pending[dev.ID]; !ok || t.at.Before(now) {
		c.pending[dev.ID] = contactTouch{id: dev.ID, at: now, inactive: *dev.inactiveAfter(now)}
	}
	s.scheduleFlush()
}

// FlushContacts writes the pending contact times of unchanged check-ins
// now (Store.Close calls it; tests read after it). Times never move back: a
// device whose row holds a later contact time keeps it. On failure the
// times stay pending and a flush is scheduled again.
func (s *DeviceStore) FlushContacts(ctx context.Context) error {
	c := &s.contacts
	c.flushing.Lock()
	defer c.flushing.Unlock()
	c.mu.Lock()
	batch := make([]contactTouch, 0, len(c.pending))
	for _, t := range c.pending {
		batch = append(batch, t)
	}
	c.pending, c.scheduled = nil, false
	c.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	// In id order, so that flushes of several processes lock rows in the
	// same order.
	slices.SortFunc(batch, func(a, b contactTouch) int { return cmp.Compare(a.id, b.id) })
	err := s.d.touchDevices(ctx, s.db, batch)
	if err == nil {
		return nil
	}
	c.mu.Lock()
	if c.pending == nil {
		c.pending = make(map[int64]contactTouch, len(batch))
	}
	for _, t := range batch {
		if have, ok := c.pending[t.id]; !ok || have.at.Before(t.at) {
			c.pending[t.id] = t
		}
	}
	s.scheduleFlush()
	c.mu.Unlock()
	return models.Unavailable(fmt.Errorf("record check-ins: %w", err))
}

// scheduleFlush makes a flush run in ContactFlushInterval unless one is
// scheduled; the caller holds c.mu.
func (s *DeviceStore) scheduleFlush() {
	if s.contacts.scheduled || s.contacts.closed {
		return
	}
	s.contacts.scheduled = true
	time.AfterFunc(ContactFlushInterval, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.FlushContacts(ctx) // on failure the times stay pending and a flush is scheduled again
	})
}

// CloseContacts writes the pending contact times and schedules no more
// flushes (Store.Close).
func (s *DeviceStore) CloseContacts(ctx context.Context) error {
	err := s.FlushContacts(ctx)
	s.contacts.mu.Lock()
	s.contacts.closed = true
	s.contacts.mu.Unlock()
	return err
}
