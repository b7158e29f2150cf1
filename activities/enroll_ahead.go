package activities

import (
	"context"
	"sync"
	"time"
)

// aheadKey names a chunk of a CSV job: its first row, where that row starts.
type aheadKey struct{ job, row, offset int64 }

// aheadTTL bounds how long a prepared chunk waits for its activity (which
// may run on another worker, or never when the job stops), and how long
// preparing one may take; aheadMax bounds how many wait at once.
const (
	aheadTTL = time.Minute
	aheadMax = 16
)

// lookahead holds chunks prepared in the background for the activities
// that will write them. The zero value is ready to use.
type lookahead struct {
	mu     sync.Mutex
	chunks map[aheadKey]*aheadChunk
}

type aheadChunk struct {
	ready   chan struct{} // closed when chunk and err are set
	chunk   *csvChunk
	err     error
	started time.Time
}

// start prepares the chunk at key in the background, unless it is already
// being prepared.
func (l *lookahead) start(key aheadKey, prepare func(ctx context.Context) (*csvChunk, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chunks == nil {
		l.chunks = map[aheadKey]*aheadChunk{}
	}
	if _, ok := l.chunks[key]; ok {
		return
	}
	now := time.Now()
	for k, c := range l.chunks {
		if now.Sub(c.started) > aheadTTL {
			delete(l.chunks, k)
		}
	}
	if len(l.chunks) >= aheadMax {
		return
	}
	c := &aheadChunk{ready: make(chan struct{}), started: now}
	l.chunks[key] = c
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), aheadTTL)
		defer cancel()
		c.chunk, c.err = prepare(ctx)
		close(c.ready)
	}()
}

// take returns the chunk prepared for key, waiting for it if it is still
// being prepared, or nil when there is none. A chunk is taken once.
func (l *lookahead) take(ctx context.Context, key aheadKey) (*csvChunk, error) {
	l.mu.Lock()
	c, ok := l.chunks[key]
	delete(l.chunks, key)
	l.mu.Unlock()
	if !ok || time.Since(c.started) > aheadTTL {
		return nil, nil
	}
	select {
	case <-c.ready:
		return c.chunk, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
