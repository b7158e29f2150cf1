package audit

import (
	"cmp"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"runtime"
	"slices"
	"sync"
	"time"
)

// VerifyEvent is one event as a verification reads it: its number, its
// canonical JSON and, when read from the database, the hash stored with it
// (empty from an export file).
type VerifyEvent struct {
	Sequence   int64
	Body       string
	StoredHash string
}

// Verification checks an organization's events against its digests. Feed
// it the digests (Digests), then every event in sequence order (Event),
// then call Finish.
type Verification struct {
	keys    map[string]ed25519.PublicKey
	digests []Digest
	// head is the last sequence the database numbered (0: unknown, from a
	// file); pruned the last one retention deleted.
	head, pruned int64
	// start is the first sequence in scope (0: all); events before it are
	// passed over.
	start int64

	problems []string
	sealed   int64 // events checked against a digest
	unsealed int64 // events after the last digest

	cur      int       // index of the digest the next event belongs to
	expected int64     // the sequence the next event should have
	leaves   hash.Hash // the SHA-256 of the current digest's event hashes so far
	bad      bool      // the current digest already has a named problem
}

// NewVerification starts a verification with the public keys that may have
// signed the digests, the digests (any order), the database's last
// sequence (0 when unknown) and the last sequence retention pruned.
func NewVerification(keys []ed25519.PublicKey, digests []Digest, head, pruned int64) *Verification {
	return NewVerificationSince(keys, digests, head, pruned, time.Time{})
}

// NewVerificationSince is NewVerification of the digests that end at or
// after since and of their events only (the zero time: all).
func NewVerificationSince(keys []ed25519.PublicKey, digests []Digest, head, pruned int64, since time.Time) *Verification {
	v := &Verification{keys: map[string]ed25519.PublicKey{}, head: head, pruned: pruned, leaves: sha256.New()}
	for _, k := range keys {
		v.keys[KeyID(k)] = k
	}
	for _, d := range digests {
		if since.IsZero() || !d.PeriodEnd.Before(since) {
			v.digests = append(v.digests, d)
		}
	}
	sortDigests(v.digests)
	v.checkDigests()
	v.expected = pruned + 1
	if !since.IsZero() && len(v.digests) > 0 {
		v.start = v.digests[0].FromSeq
		v.expected = max(v.expected, v.start)
	}
	for v.cur < len(v.digests) && v.digests[v.cur].ToSeq <= pruned {
		v.cur++
	}
	return v
}

func sortDigests(ds []Digest) {
	slices.SortFunc(ds, func(a, b Digest) int { return cmp.Compare(a.Number, b.Number) })
}

func (v *Verification) problem(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

// checkDigests checks each digest's hash, signature and place in the chain.
func (v *Verification) checkDigests() {
	for i := range v.digests {
		d := &v.digests[i]
		sum := sha256.Sum256(d.canonical())
		if hex.EncodeToString(sum[:]) != d.DigestHash {
			v.problem("digest %d: altered: its content does not hash to its digest_hash", d.Number)
		}
		key, ok := v.keys[d.KeyID]
		sig, err := base64.StdEncoding.DecodeString(d.Signature)
		switch {
		case !ok:
			v.problem("digest %d: forged: signed by key %s, which is not a key given", d.Number, d.KeyID)
		case err != nil || !ed25519.Verify(key, d.canonical(), sig):
			v.problem("digest %d: forged: its signature does not verify", d.Number)
		}
		if i == 0 {
			if d.Number != 1 && d.FromSeq > v.pruned+1 && v.start == 0 {
				v.problem("digest %d: digests 1 to %d are missing", d.Number, d.Number-1)
			}
			continue
		}
		p := &v.digests[i-1]
		switch {
		case d.Number != p.Number+1:
			v.problem("digest %d: digests %d to %d are missing", d.Number, p.Number+1, d.Number-1)
		case d.PreviousHash != p.DigestHash:
			v.problem("digest %d: does not follow digest %d (its previous_hash is not that digest's hash)", d.Number, p.Number)
		case d.FromSeq != p.ToSeq+1:
			v.problem("digest %d: starts at event %d, not after digest %d's last event %d", d.Number, d.FromSeq, p.Number, p.ToSeq)
		}
	}
}

// Event checks the next event (in sequence order).
func (v *Verification) Event(ev VerifyEvent) {
	v.event(ev, checkBody(ev.Body))
}

// bodyCheck is what an event's body alone says: its SHA-256, and the id
// and sequence its JSON names (ok false: it is not JSON naming them).
// Bodies are checked apart from the order-dependent rest (bodyChecks), so
// that a batch's can be checked at once on every core.
type bodyCheck struct {
	hash     [sha256.Size]byte
	id       string
	sequence int64
	ok       bool
}

// checkBody hashes body and reads the id and sequence its JSON names.
func checkBody(body string) bodyCheck {
	b := []byte(body)
	c := bodyCheck{hash: sha256.Sum256(b)}
	var rec struct {
		ID       string `json:"id"`
		Sequence int64  `json:"sequence"`
	}
	if json.Unmarshal(b, &rec) == nil {
		c.id, c.sequence, c.ok = rec.ID, rec.Sequence, true
	}
	return c
}

// bodyChecks holds the body checks of a batch of events, made at once on
// every core (check), for eventChecked to use in sequence order.
type bodyChecks struct{ checks []bodyCheck }

// check checks the bodies of evs, each core taking a share.
func (b *bodyChecks) check(evs []VerifyEvent) {
	b.checks = slices.Grow(b.checks[:0], len(evs))[:len(evs)]
	workers := min(runtime.GOMAXPROCS(0), max(1, len(evs)/256))
	per := (len(evs) + workers - 1) / workers
	var wg sync.WaitGroup
	for start := 0; start < len(evs); start += per {
		end := min(start+per, len(evs))
		wg.Go(func() {
			for i := start; i < end; i++ {
				b.checks[i] = checkBody(evs[i].Body)
			}
		})
	}
	wg.Wait()
}

// eventChecked is Event of evs[i] (the events check was given), with its
// body's check made.
func (v *Verification) eventChecked(evs []VerifyEvent, b *bodyChecks, i int) {
	v.event(evs[i], b.checks[i])
}

// event checks the next event, c its body's check.
func (v *Verification) event(ev VerifyEvent, c bodyCheck) {
	if ev.Sequence < v.start {
		return
	}
	if ev.Sequence <= v.pruned {
		v.problem("event %d: present though retention pruned the events up to %d", ev.Sequence, v.pruned)
		return
	}
	for ev.Sequence > v.expected { // a gap
		v.removed(v.expected)
	}
	v.expected = ev.Sequence + 1
	altered := false
	if !c.ok || c.sequence != ev.Sequence {
		v.problem("event %d: altered: its JSON does not name its sequence", ev.Sequence)
		altered = true
	} else if ev.StoredHash != "" && !hashIs(ev.StoredHash, c.hash) {
		v.problem("event %d (id %s): altered: its content does not match its hash", ev.Sequence, c.id)
		altered = true
	}
	if v.head > 0 && ev.Sequence > v.head {
		v.problem("event %d (id %s): inserted: numbered past the organization's last event %d", ev.Sequence, c.id, v.head)
		return
	}
	d := v.digestOf(ev.Sequence)
	if d == nil {
		v.unsealed++
		return
	}
	v.sealed++
	v.bad = v.bad || altered
	v.leaves.Write(c.hash[:])
	if ev.Sequence == d.ToSeq {
		v.closeDigest()
	}
}

// hashIs reports whether stored, a hash in hex, is sum.
func hashIs(stored string, sum [sha256.Size]byte) bool {
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], sum[:])
	return stored == string(text[:])
}

// removed records that event seq is missing.
func (v *Verification) removed(seq int64) {
	if d := v.digestOf(seq); d != nil {
		v.problem("event %d: removed (sealed by digest %d)", seq, d.Number)
		v.bad = true
		v.leaves.Write(make([]byte, sha256.Size))
		if seq == d.ToSeq {
			v.closeDigest()
		}
	} else if v.head == 0 || seq <= v.head {
		v.problem("event %d: removed (not sealed yet)", seq)
	}
	v.expected = seq + 1
}

// digestOf returns the digest that covers seq, moving past digests whose
// events all went by; nil for an event after the last digest.
func (v *Verification) digestOf(seq int64) *Digest {
	for v.cur < len(v.digests) && v.digests[v.cur].ToSeq < seq {
		v.closeDigest()
	}
	if v.cur < len(v.digests) && v.digests[v.cur].FromSeq <= seq {
		return &v.digests[v.cur]
	}
	return nil
}

// closeDigest compares the events read for the current digest with it.
func (v *Verification) closeDigest() {
	d := &v.digests[v.cur]
	var sum [sha256.Size]byte
	v.leaves.Sum(sum[:0])
	if !v.bad && !hashIs(d.EventsHash, sum) {
		v.problem("digest %d: its events %d to %d do not match it (one was altered, inserted or removed)", d.Number, d.FromSeq, d.ToSeq)
	}
	v.leaves.Reset()
	v.bad = false
	v.cur++
}

// Result is what a verification found.
type Result struct {
	// Problems names each event altered, inserted or removed and each
	// digest missing, altered or forged; empty when the log verifies.
	Problems []string
	Digests  int
	Sealed   int64 // events checked against their digest
	Unsealed int64 // events after the last digest, not sealed yet
	Pruned   int64 // the last sequence retention deleted (0: none)
}

// Finish ends the verification: digests whose events never came are
// reported missing.
func (v *Verification) Finish() Result {
	for v.cur < len(v.digests) {
		d := &v.digests[v.cur]
		for v.expected <= d.ToSeq {
			v.removed(v.expected)
		}
		if v.cur < len(v.digests) && &v.digests[v.cur] == d {
			v.closeDigest()
		}
	}
	return Result{Problems: v.problems, Digests: len(v.digests), Sealed: v.sealed, Unsealed: v.unsealed, Pruned: v.pruned}
}
