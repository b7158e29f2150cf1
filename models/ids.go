package models

import (
	"crypto/rand"
	"encoding/binary"
	"strconv"
	"sync"
	"time"
)

// Ids are 63-bit snowflakes made before insert, so that a row (a job, say)
// has its id before anything else refers to it: 41 bits of milliseconds since
// idEpoch, 10 bits of node and 12 bits of sequence. The node is drawn at random
// per process; within a process ids are strictly increasing.
var idEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

type idGenerator struct {
	mu   sync.Mutex
	node int64
	last int64 // last millisecond used
	seq  int64
}

var ids = newIDGenerator()

func newIDGenerator() *idGenerator {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return &idGenerator{node: int64(binary.BigEndian.Uint16(b[:]) & 0x3ff)}
}

func (g *idGenerator) next() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Since(idEpoch).Milliseconds()
	if now < g.last { // the clock went back: keep counting from the last one
		now = g.last
	}
	if now == g.last {
		g.seq = (g.seq + 1) & 0xfff
		if g.seq == 0 { // 4096 ids in one millisecond: borrow the next one
			now++
		}
	} else {
		g.seq = 0
	}
	g.last = now
	return now<<22 | g.node<<12 | g.seq
}

// NewID returns a fresh id.
func NewID() int64 { return ids.next() }

// FormatID writes an id the way the API shows it: a digit string.
func FormatID(id int64) string { return strconv.FormatInt(id, 10) }

// ParseID reads an id written by FormatID. Anything else is EINVALID.
func ParseID(field, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, Invalid(field, "must be a positive integer id")
	}
	return id, nil
}
